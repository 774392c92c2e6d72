import { canonicalJson, sha256Hex } from '../../attest/index.ts';
import { toCycloneDx17, type CycloneDx17Bom } from './cyclonedx17.ts';
import type { ViewInput } from './input.ts';
import { toSpdx3, type Spdx3Document } from './spdx3.ts';

/**
 * The standard views of an AIBOM, by format name (the `format` query parameter of the AIBOM route
 * and `service-ctl aibom generate --format`). Each is a function of the view input alone; its bytes
 * are the UTF-8 of its RFC 8785 (JCS) canonical JSON, as for the AIBOM, so anyone can recompute
 * them and their digest. Recorded as a vault record (kind `artifact`) whose in-toto statement has
 * the view as predicate, the format's standard predicate type, and subject
 * `artifact:<run>:<artifactName>` with the digest of these bytes.
 */
export const VIEW_FORMATS = {
  'cyclonedx-1.7': {
    predicateType: 'https://cyclonedx.org/bom',
    mediaType: 'application/vnd.cyclonedx+json; version=1.7',
    artifactName: 'aibom.cdx-1.7.json',
    build: (input: ViewInput): CycloneDx17Bom => toCycloneDx17(input),
  },
  'spdx-3.0.1': {
    predicateType: 'https://spdx.dev/Document/v3',
    mediaType: 'application/spdx+json',
    artifactName: 'aibom.spdx-3.0.1.json',
    build: (input: ViewInput): Spdx3Document => toSpdx3(input),
  },
} as const;

export type ViewFormat = keyof typeof VIEW_FORMATS;
export const VIEW_FORMAT_NAMES = Object.keys(VIEW_FORMATS) as ViewFormat[];

export function isViewFormat(v: unknown): v is ViewFormat {
  return typeof v === 'string' && Object.hasOwn(VIEW_FORMATS, v);
}

export type ViewDocument = CycloneDx17Bom | Spdx3Document;

/** A view built: the document, its bytes and their digest. */
export interface BuiltView {
  readonly format: ViewFormat;
  readonly document: ViewDocument;
  readonly bytes: Buffer;
  /** `sha256:<hex>` of `bytes`. */
  readonly digest: string;
}

/** The bytes of a view: UTF-8 of its JCS canonical JSON, no trailing newline. */
export function serializeView(document: unknown): Buffer {
  return Buffer.from(canonicalJson(document), 'utf8');
}

export function buildView(format: ViewFormat, input: ViewInput): BuiltView {
  const document = VIEW_FORMATS[format].build(input);
  const bytes = serializeView(document);
  return { format, document, bytes, digest: `sha256:${sha256Hex(bytes)}` };
}

/** Every view of an AIBOM, in VIEW_FORMAT_NAMES order. */
export function buildViews(input: ViewInput): BuiltView[] {
  return VIEW_FORMAT_NAMES.map((f) => buildView(f, input));
}

/** The CLI form: the canonical document indented by two spaces, trailing newline (JCS of it = the bytes). */
export function prettyView(document: unknown): string {
  return `${JSON.stringify(JSON.parse(canonicalJson(document)), null, 2)}\n`;
}

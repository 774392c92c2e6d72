import { AibomError } from './errors.ts';
import type { CycloneDxBom } from './cyclonedx.ts';
import { UUID_PATTERN } from './uuid.ts';

/**
 * Checking a CycloneDX view: the official CycloneDX 1.5 JSON schema (strict, through
 * `@cyclonedx/cyclonedx-library`, which reads its bundled schema files: the one part of this module
 * that is not pure, hence loaded on first use), then what the schema cannot express.
 */
export type CycloneDxProblemCode =
  /** The document fails the official CycloneDX 1.5 JSON schema (strict). */
  | 'SCHEMA'
  /** Two objects carry the same `bom-ref` (CycloneDX requires them unique within a BOM). */
  | 'DUPLICATE_BOM_REF'
  /** A `dependencies[].ref` or `dependsOn[]` entry names no `bom-ref` of the document. */
  | 'DANGLING_REF'
  /** Two `dependencies[]` entries have the same `ref`. */
  | 'DUPLICATE_DEPENDENCY'
  /** A hash's `content` has the wrong length for its `alg` (the schema accepts any listed length for any algorithm). */
  | 'HASH_LENGTH'
  /** An `attestation` external reference is not `urn:uuid:<uuid>`. */
  | 'ATTESTATION_URL';

export interface CycloneDxProblem {
  code: CycloneDxProblemCode;
  /** JSON Pointer of the offending value. */
  path: string;
  message: string;
}

interface JsonStrictValidator {
  validate(data: string): Promise<unknown>;
}

const validators = new Map<'1.5' | '1.7', Promise<JsonStrictValidator>>();

/** The library's strict JSON validator of a CycloneDX version (the official schema, bundled). */
export function schemaValidator(version: '1.5' | '1.7' = '1.5'): Promise<JsonStrictValidator> {
  // The library compiles the schema once per validator instance; keep one per version for the process.
  let validator = validators.get(version);
  if (validator === undefined) {
    validator = import('@cyclonedx/cyclonedx-library').then(
      ({ Spec, Validation }) =>
        new Validation.JsonStrictValidator(version === '1.7' ? Spec.Version.v1dot7 : Spec.Version.v1dot5),
    );
    validators.set(version, validator);
  }
  return validator;
}

const HEX_LENGTH: Readonly<Record<string, number>> = {
  MD5: 32,
  'SHA-1': 40,
  'SHA-256': 64,
  'SHA-384': 96,
  'SHA-512': 128,
  'SHA3-256': 64,
  'SHA3-384': 96,
  'SHA3-512': 128,
  'BLAKE2b-256': 64,
  'BLAKE2b-384': 96,
  'BLAKE2b-512': 128,
};

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const pointer = (path: string, key: string | number): string =>
  `${path}/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`;

export function schemaProblems(error: unknown): CycloneDxProblem[] {
  const list = Array.isArray(error) ? (error as unknown[]) : [error];
  return list.map((e) => {
    const r = isRecord(e) ? e : {};
    const path = typeof r.instancePath === 'string' ? r.instancePath : '';
    const message = typeof r.message === 'string' ? r.message : JSON.stringify(e);
    return { code: 'SCHEMA', path, message };
  });
}

/** Collects every `bom-ref`, every hash and every attestation reference, wherever they are. */
function walk(
  value: unknown,
  path: string,
  visit: (node: Record<string, unknown>, path: string) => void,
): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => walk(v, pointer(path, i), visit));
  } else if (isRecord(value)) {
    visit(value, path);
    for (const [k, v] of Object.entries(value)) walk(v, pointer(path, k), visit);
  }
}

export function referentialProblems(doc: unknown): CycloneDxProblem[] {
  const problems: CycloneDxProblem[] = [];
  const refs = new Set<string>();
  walk(doc, '', (node, path) => {
    const ref = node['bom-ref'];
    if (typeof ref === 'string') {
      if (refs.has(ref)) {
        problems.push({
          code: 'DUPLICATE_BOM_REF',
          path: pointer(path, 'bom-ref'),
          message: `bom-ref ${ref} is not unique`,
        });
      }
      refs.add(ref);
    }
    if (Array.isArray(node.hashes)) {
      node.hashes.forEach((h: unknown, i) => {
        if (!isRecord(h) || typeof h.alg !== 'string' || typeof h.content !== 'string') return;
        const want = HEX_LENGTH[h.alg];
        if (want !== undefined && h.content.length !== want) {
          problems.push({
            code: 'HASH_LENGTH',
            path: pointer(pointer(pointer(path, 'hashes'), i), 'content'),
            message: `${h.alg} content must be ${want} hex digits, got ${h.content.length}`,
          });
        }
      });
    }
    if (node.type === 'attestation' && typeof node.url === 'string') {
      const m = /^urn:uuid:(.*)$/.exec(node.url);
      if (m === null || !UUID_PATTERN.test(m[1] ?? '')) {
        problems.push({
          code: 'ATTESTATION_URL',
          path: pointer(path, 'url'),
          message: `${node.url} is not urn:uuid:<uuid>`,
        });
      }
    }
  });
  const deps = isRecord(doc) && Array.isArray(doc.dependencies) ? (doc.dependencies as unknown[]) : [];
  const seen = new Set<string>();
  deps.forEach((d, i) => {
    if (!isRecord(d)) return;
    const at = pointer('/dependencies', i);
    if (typeof d.ref === 'string') {
      if (!refs.has(d.ref))
        problems.push({
          code: 'DANGLING_REF',
          path: pointer(at, 'ref'),
          message: `${d.ref} names no bom-ref`,
        });
      if (seen.has(d.ref)) {
        problems.push({
          code: 'DUPLICATE_DEPENDENCY',
          path: pointer(at, 'ref'),
          message: `${d.ref} has two entries`,
        });
      }
      seen.add(d.ref);
    }
    if (Array.isArray(d.dependsOn)) {
      d.dependsOn.forEach((r: unknown, j) => {
        if (typeof r === 'string' && !refs.has(r)) {
          problems.push({
            code: 'DANGLING_REF',
            path: pointer(pointer(at, 'dependsOn'), j),
            message: `${r} names no bom-ref`,
          });
        }
      });
    }
  });
  return problems;
}

/**
 * Every problem of a CycloneDX 1.5 JSON document (the view, or its text); empty when it is valid.
 * Rejects only when the document is not JSON or the optional validator dependencies (`ajv`,
 * `ajv-formats`, `ajv-formats-draft2019`) are missing.
 */
export async function validateCycloneDx(doc: CycloneDxBom | string): Promise<CycloneDxProblem[]> {
  const text = typeof doc === 'string' ? doc : JSON.stringify(doc);
  const parsed: unknown = typeof doc === 'string' ? JSON.parse(doc) : doc;
  const error = await (await schemaValidator()).validate(text);
  return [...(error === null ? [] : schemaProblems(error)), ...referentialProblems(parsed)];
}

/** validateCycloneDx, throwing AibomError CYCLONEDX_INVALID (message lists every problem). */
export async function assertValidCycloneDx(doc: CycloneDxBom | string): Promise<void> {
  const problems = await validateCycloneDx(doc);
  if (problems.length > 0) {
    throw new AibomError(
      'CYCLONEDX_INVALID',
      problems.map((p) => `${p.code} at ${p.path || '/'}: ${p.message}`).join('; '),
    );
  }
}

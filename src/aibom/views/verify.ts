import { sha256Hex, subjectNames, verifyRecord, type Trust } from '../../attest/index.ts';
import type { Aibom } from '../types.ts';
import { declarationProblems, evidenceRecord, spdxProfileProblems } from './check.ts';
import { serializeView, VIEW_FORMATS, VIEW_FORMAT_NAMES, type ViewFormat } from './format.ts';

/**
 * Offline check of the standard views recorded with an AIBOM (`service-ctl verify --aibom DIR`
 * and the export bundle verifier): each view must be signed by its record (DSSE signature,
 * statement, labels; exactly these bytes under the standard's predicate type and the view's
 * subject), be the one the AIBOM's metadata lists, and be about this AIBOM (its digest inside,
 * evidence naming only its records, the SPDX AI and Dataset profiles). Given the records at hand
 * (an export bundle), evidence naming one of them must carry its digest; given that they are all of
 * the AIBOM's records, every evidence entry must name one. Given the views recomputed from them, the
 * bytes must be those. Pure; never throws for bad input.
 */

export interface ViewPart {
  readonly format: ViewFormat;
  /** The view's bytes as delivered (the route's body, the bundle's file), if present. */
  readonly bytes?: Buffer | undefined;
  /** The view's record as `GET /v1/attestations/{id}` returns it, if present. */
  readonly record?: unknown;
}

export interface ViewCheckProblem {
  readonly part: 'view';
  readonly code: string;
  readonly message: string;
}

export interface ViewCheckInput {
  /** The AIBOM as signed (parsed) and the digest of its bytes. */
  readonly bom: Aibom;
  readonly aibomDigest: string;
  /** The metadata record's `views` (format → attestation_id, digest, ...). */
  readonly views: unknown;
  readonly parts: readonly ViewPart[];
  /** Whom the view records must be signed by: the AIBOM's signer (its C2PA manifest's chain). */
  readonly trust: Trust | undefined;
  /** Record id → record digest of the records at hand (an export bundle). */
  readonly records?: ReadonlyMap<string, string>;
  /** `records` holds every record the AIBOM lists: evidence naming any other fails. */
  readonly recordsComplete?: boolean;
  /** The views recomputed from the AIBOM and all the records it lists, when they are at hand. */
  readonly recomputed?: ReadonlyMap<ViewFormat, Buffer>;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []);

/** Every view the metadata lists (and any other delivered), checked; one line per view that verified. */
export function verifyViews(input: ViewCheckInput): { lines: string[]; problems: ViewCheckProblem[] } {
  const lines: string[] = [];
  const problems: ViewCheckProblem[] = [];
  const listed = isRecord(input.views) ? input.views : {};
  for (const format of VIEW_FORMAT_NAMES) {
    const part = input.parts.find((p) => p.format === format);
    if (!isRecord(listed[format]) && part?.bytes === undefined) continue;
    const one = verifyView(format, part ?? { format }, input);
    problems.push(...one.problems);
    if (one.line !== undefined) lines.push(one.line);
  }
  return { lines, problems };
}

/** One view: its bytes and record, against the metadata's entry for it and the AIBOM. */
export function verifyView(
  format: ViewFormat,
  part: ViewPart,
  input: Omit<ViewCheckInput, 'parts'>,
): { line?: string; problems: ViewCheckProblem[] } {
  const problems: ViewCheckProblem[] = [];
  const fail = (code: string, message: string) =>
    problems.push({ part: 'view', code, message: `${format}: ${message}` });
  const entry = isRecord(input.views) ? input.views[format] : undefined;
  if (!isRecord(entry)) {
    fail('VIEW_UNLISTED', 'a view the metadata record does not list');
    return { problems };
  }
  if (part.bytes === undefined || part.record === undefined) {
    fail(
      'VIEW_MISSING',
      `the metadata lists the view, but its ${part.bytes === undefined ? 'bytes' : 'record'} are missing`,
    );
    return { problems };
  }
  const runId = input.bom.metadata.run_id;
  const digest = `sha256:${sha256Hex(part.bytes)}`;
  if (digest !== entry.digest)
    fail('VIEW_DIGEST_MISMATCH', `the view is ${digest}, the metadata says ${String(entry.digest)}`);
  const checked = input.trust !== undefined ? verifyRecord(part.record, input.trust) : undefined;
  if (checked === undefined) {
    fail('VIEW_RECORD_UNVERIFIED', "no trusted AIBOM signer to check the view's record against");
  } else if (!checked.ok) {
    for (const p of checked.problems) fail(`VIEW_RECORD_${p.code}`, p.message);
  }
  const recordId = isRecord(part.record) ? part.record.id : undefined;
  if (recordId !== entry.attestation_id) {
    fail(
      'VIEW_RECORD_MISMATCH',
      `the record is ${String(recordId)}, the metadata names ${String(entry.attestation_id)}`,
    );
  }
  const statement = checked?.statement;
  const spec = VIEW_FORMATS[format];
  const subjectName = subjectNames.artifact(runId, spec.artifactName);
  if (statement !== undefined) {
    const subject = statement.subject[0];
    if (
      statement.predicateType !== spec.predicateType ||
      statement.subject.length !== 1 ||
      subject?.name !== subjectName ||
      `sha256:${subject.digest.sha256 ?? ''}` !== digest ||
      !serializeView(statement.predicate).equals(part.bytes)
    ) {
      fail(
        'VIEW_NOT_SIGNED',
        `the record does not sign these bytes as ${spec.predicateType} of ${subjectName}`,
      );
    }
  }
  let doc: unknown;
  try {
    doc = JSON.parse(part.bytes.toString('utf8'));
  } catch {
    fail('VIEW_MALFORMED', 'not JSON');
  }
  if (doc !== undefined) {
    for (const p of contentProblems(format, doc, input)) fail(p.code, p.message);
  }
  const recomputed = input.recomputed?.get(format);
  if (recomputed !== undefined && !recomputed.equals(part.bytes)) {
    fail(
      'VIEW_NOT_RECOMPUTED',
      'the view recomputed from the AIBOM and its records differs from the recorded bytes',
    );
  }
  if (problems.length > 0) return { problems };
  const how = recomputed !== undefined ? ', recomputed byte for byte from the AIBOM and its records' : '';
  return {
    line: `view       ${format} ${digest} signed by record ${String(entry.attestation_id)}${how}`,
    problems,
  };
}

/** What the view says must be of this AIBOM: its digest, its records, and the checks of check.ts. */
function contentProblems(
  format: ViewFormat,
  doc: unknown,
  input: Omit<ViewCheckInput, 'parts'>,
): { code: string; message: string }[] {
  const out: { code: string; message: string }[] = [];
  const other = { code: 'VIEW_OTHER_AIBOM', message: `the view is not of the AIBOM ${input.aibomDigest}` };
  if (format === 'cyclonedx-1.7') {
    const refs = isRecord(doc) ? list(doc.externalReferences) : [];
    const bomRef = refs.find((r) => isRecord(r) && r.type === 'bom');
    const hash = isRecord(bomRef) ? list(bomRef.hashes)[0] : undefined;
    if (!isRecord(hash) || `sha256:${String(hash.content)}` !== input.aibomDigest) out.push(other);
    // Evidence names only the AIBOM's own records, with their digests where they are at hand.
    const ids = new Set(input.bom.trust.attestation_ids);
    const evidence = isRecord(doc) && isRecord(doc.declarations) ? doc.declarations.evidence : undefined;
    for (const e of list(evidence)) {
      const named = evidenceRecord(e);
      if (named !== undefined && !ids.has(named.id)) {
        out.push({
          code: 'VIEW_EVIDENCE_FOREIGN',
          message: `evidence names ${named.id}, which the AIBOM does not list`,
        });
      }
    }
    for (const p of declarationProblems(doc, input.records, { complete: input.recordsComplete === true })) {
      out.push({ code: `VIEW_${p.code}`, message: `${p.path}: ${p.message}` });
    }
  } else {
    const graph = isRecord(doc) ? list(doc['@graph']) : [];
    const run = graph.find(
      (e) => isRecord(e) && e.type === 'build_Build' && e.build_buildId === input.bom.metadata.run_id,
    );
    const params = isRecord(run) ? list(run.build_parameter) : [];
    const stated = params.find((p) => isRecord(p) && p.key === 'aibom_digest');
    if (!isRecord(stated) || stated.value !== input.aibomDigest) out.push(other);
    for (const p of spdxProfileProblems(doc))
      out.push({ code: `VIEW_${p.code}`, message: `${p.path}: ${p.message}` });
  }
  return out;
}

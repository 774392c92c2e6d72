import { sha256Hex, subjectNames, verifyRecord, type Trust } from '../../attest/index.ts';
import type { Aibom } from '../types.ts';
import { declarationProblems, evidenceRecord, spdxProfileProblems } from './check.ts';
import { serializeView, VIEW_FORMATS, VIEW_FORMAT_NAMES, type ViewFormat } from './format.ts';

/**
 * Offline check of the standard views recorded with an AIBOM (`service-ctl verify --aibom DIR`
 * and the export bundle verifier): each view listed in the metadata record must be there, its
 * record must verify (DSSE signature, statement, labels) and sign exactly these bytes under the
 * standard's predicate type and the view's subject, and its content must be about this AIBOM
 * (evidence naming the AIBOM's records; the SPDX AI and Dataset profiles). Given every record the
 * AIBOM lists (an export bundle of the run), the evidence digests must be theirs, and given the
 * views recomputed from them, the recorded bytes must be those, byte for byte. Pure; never throws
 * for bad input.
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
  /** Record id → record digest of the records at hand (an export bundle); checks evidence digests. */
  readonly records?: ReadonlyMap<string, string>;
  /** The views recomputed from the AIBOM and all the records it lists, when they are at hand. */
  readonly recomputed?: ReadonlyMap<ViewFormat, Buffer>;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? (v as unknown[]) : []);

export function verifyViews(input: ViewCheckInput): { lines: string[]; problems: ViewCheckProblem[] } {
  const lines: string[] = [];
  const problems: ViewCheckProblem[] = [];
  const fail = (code: string, message: string) => problems.push({ part: 'view', code, message });
  const listed = isRecord(input.views) ? input.views : {};
  const runId = input.bom.metadata.run_id;
  const ids = new Set(input.bom.trust.attestation_ids);
  for (const format of VIEW_FORMAT_NAMES) {
    const entry = listed[format];
    const part = input.parts.find((p) => p.format === format);
    if (!isRecord(entry)) {
      if (part?.bytes !== undefined)
        fail('VIEW_UNLISTED', `${format}: a view the metadata record does not list`);
      continue;
    }
    const before = problems.length;
    if (part?.bytes === undefined || part.record === undefined) {
      fail(
        'VIEW_MISSING',
        `${format}: the metadata lists the view, but its ${part?.bytes === undefined ? 'bytes' : 'record'} are missing`,
      );
      continue;
    }
    const digest = `sha256:${sha256Hex(part.bytes)}`;
    if (digest !== entry.digest)
      fail(
        'VIEW_DIGEST_MISMATCH',
        `${format}: the view is ${digest}, the metadata says ${String(entry.digest)}`,
      );
    const checked = input.trust !== undefined ? verifyRecord(part.record, input.trust) : undefined;
    if (checked === undefined) {
      fail('VIEW_RECORD_UNVERIFIED', `${format}: no trusted AIBOM signer to check the view's record against`);
    } else if (!checked.ok) {
      for (const p of checked.problems) fail(`VIEW_RECORD_${p.code}`, `${format}: ${p.message}`);
    }
    const statement = checked?.statement;
    const spec = VIEW_FORMATS[format];
    const recordId = isRecord(part.record) ? part.record.id : undefined;
    if (recordId !== entry.attestation_id) {
      fail(
        'VIEW_RECORD_MISMATCH',
        `${format}: the record is ${String(recordId)}, the metadata names ${String(entry.attestation_id)}`,
      );
    }
    if (statement !== undefined) {
      const subject = statement.subject[0];
      if (
        statement.predicateType !== spec.predicateType ||
        statement.subject.length !== 1 ||
        subject?.name !== subjectNames.artifact(runId, spec.artifactName) ||
        `sha256:${subject.digest.sha256 ?? ''}` !== digest ||
        !serializeView(statement.predicate).equals(part.bytes)
      ) {
        fail(
          'VIEW_NOT_SIGNED',
          `${format}: the record does not sign these bytes as ${spec.predicateType} of ${subjectNames.artifact(runId, spec.artifactName)}`,
        );
      }
    }
    let doc: unknown;
    try {
      doc = JSON.parse(part.bytes.toString('utf8'));
    } catch {
      fail('VIEW_MALFORMED', `${format}: not JSON`);
    }
    if (doc !== undefined) {
      for (const p of contentProblems(format, doc, input)) fail(p.code, `${format}: ${p.message}`);
      // Evidence names only the AIBOM's own records.
      if (format === 'cyclonedx-1.7') {
        const evidence = isRecord(doc) && isRecord(doc.declarations) ? doc.declarations.evidence : undefined;
        for (const e of list(evidence)) {
          const named = evidenceRecord(e);
          if (named !== undefined && !ids.has(named.id)) {
            fail(
              'VIEW_EVIDENCE_FOREIGN',
              `${format}: evidence names ${named.id}, which the AIBOM does not list`,
            );
          }
        }
      }
    }
    const recomputed = input.recomputed?.get(format);
    if (recomputed !== undefined && !recomputed.equals(part.bytes)) {
      fail(
        'VIEW_NOT_RECOMPUTED',
        `${format}: the views recomputed from the AIBOM and its records differ from the recorded bytes`,
      );
    }
    if (problems.length === before) {
      const how = recomputed !== undefined ? ', recomputed byte for byte from the AIBOM and its records' : '';
      lines.push(`view       ${format} ${digest} signed by record ${String(entry.attestation_id)}${how}`);
    }
  }
  return { lines, problems };
}

/** What the view says must be of this AIBOM: its digest, and the checks of check.ts. */
function contentProblems(
  format: ViewFormat,
  doc: unknown,
  input: ViewCheckInput,
): { code: string; message: string }[] {
  const out: { code: string; message: string }[] = [];
  if (format === 'cyclonedx-1.7') {
    const refs = isRecord(doc) ? list(doc.externalReferences) : [];
    const bomRef = refs.find((r) => isRecord(r) && r.type === 'bom');
    const hash = isRecord(bomRef) ? list(bomRef.hashes)[0] : undefined;
    if (!isRecord(hash) || `sha256:${String(hash.content)}` !== input.aibomDigest) {
      out.push({ code: 'VIEW_OTHER_AIBOM', message: `the view is not of the AIBOM ${input.aibomDigest}` });
    }
    for (const p of declarationProblems(doc, input.records))
      out.push({ code: `VIEW_${p.code}`, message: `${p.path}: ${p.message}` });
  } else {
    const graph = isRecord(doc) ? list(doc['@graph']) : [];
    const run = graph.find(
      (e) => isRecord(e) && e.type === 'build_Build' && e.build_buildId === input.bom.metadata.run_id,
    );
    const params = isRecord(run) ? list(run.build_parameter) : [];
    const stated = params.find((p) => isRecord(p) && p.key === 'aibom_digest');
    if (!isRecord(stated) || stated.value !== input.aibomDigest) {
      out.push({ code: 'VIEW_OTHER_AIBOM', message: `the view is not of the AIBOM ${input.aibomDigest}` });
    }
    for (const p of spdxProfileProblems(doc))
      out.push({ code: `VIEW_${p.code}`, message: `${p.path}: ${p.message}` });
  }
  return out;
}

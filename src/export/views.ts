import { serializeView, VIEW_FORMATS, VIEW_FORMAT_NAMES } from '../aibom/views/index.ts';
import { sha256Hex, subjectNames } from '../attest/index.ts';
import { checkedStatement } from '../http/views/envelope.ts';
import { ProblemError } from '../http/problem.ts';
import type { StoredAttestation } from '../vault/index.ts';
import type { ExportItem } from './bundle.ts';

/**
 * The file a standard view of an AIBOM adds to a bundle, next to its record: the view's bytes (the
 * JCS of the record's predicate) at `runs/<run>/<name>`, so the bundle hands CycloneDX and SPDX
 * tools the document itself. Only for a view record (kind `artifact`, a view's predicate type and
 * subject); bytes that do not hash to the digest the record signs are not exported (500
 * RECORD_TAMPERED, as the download route).
 */
export function viewFileOf(record: StoredAttestation): Pick<ExportItem, 'aibomView'> {
  if (record.kind !== 'artifact' || record.runId === null) return {};
  const runId = record.runId;
  const format = VIEW_FORMAT_NAMES.find(
    (f) =>
      VIEW_FORMATS[f].predicateType === record.predicateType &&
      record.subjects[0] === subjectNames.artifact(runId, VIEW_FORMATS[f].artifactName),
  );
  if (format === undefined) return {};
  const statement = checkedStatement(record);
  const bytes = serializeView(statement.predicate);
  const subject: unknown = Array.isArray(statement.subject) ? (statement.subject as unknown[])[0] : undefined;
  const signed = (subject as { digest?: { sha256?: unknown } } | undefined)?.digest?.sha256;
  if (sha256Hex(bytes) !== signed) {
    throw new ProblemError(
      500,
      'RECORD_TAMPERED',
      `attestation ${record.id} (the ${format} view) does not hash to the digest it signs; it is not exported`,
    );
  }
  return { aibomView: { runId, name: VIEW_FORMATS[format].artifactName, bytes } };
}

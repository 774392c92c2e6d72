import { serializeView, type ViewFormat } from '../../aibom/views/index.ts';
import { sha256Hex } from '../../attest/index.ts';
import type { Vault } from '../../vault/index.ts';
import { ProblemError } from '../problem.ts';
import { checkedStatement } from './envelope.ts';

/**
 * A standard view of the AIBOM as recorded: the bytes are the JCS of the view record's signed
 * predicate, and must hash to the digest its statement's subject and the metadata state (a record
 * altered in the database is 500 RECORD_TAMPERED, never served). 404 VIEW_NOT_RECORDED for an AIBOM
 * recorded before views existed.
 */
export async function recordedView(
  vault: Pick<Vault, 'attestations'>,
  meta: Record<string, unknown>,
  format: ViewFormat,
): Promise<{ bytes: Buffer; attestationId: string; mediaType: string; digest: string }> {
  const views = (meta.views ?? {}) as Record<
    string,
    { attestation_id?: string; digest?: string; media_type?: string }
  >;
  const entry = views[format];
  if (typeof entry?.attestation_id !== 'string' || typeof entry.digest !== 'string') {
    throw new ProblemError(
      404,
      'VIEW_NOT_RECORDED',
      `this AIBOM has no recorded ${format} view (it was recorded before views existed); service-ctl aibom generate --format ${format} computes one`,
    );
  }
  const record = await vault.attestations.get(entry.attestation_id);
  if (record === null) {
    throw new ProblemError(
      500,
      'RECORD_TAMPERED',
      `the ${format} view's record ${entry.attestation_id} is missing`,
    );
  }
  // Labels and payload as signed (500 RECORD_TAMPERED otherwise), then the bytes must be the ones
  // the statement's subject and the metadata name.
  const statement = checkedStatement(record);
  const bytes = serializeView(statement.predicate);
  const digest = `sha256:${sha256Hex(bytes)}`;
  const subject: unknown = Array.isArray(statement.subject) ? (statement.subject as unknown[])[0] : undefined;
  const signed = (subject as { digest?: { sha256?: unknown } } | undefined)?.digest?.sha256;
  if (digest !== entry.digest || `sha256:${String(signed)}` !== digest) {
    throw new ProblemError(
      500,
      'RECORD_TAMPERED',
      `the ${format} view's record ${entry.attestation_id} does not hash to the digest it signs: it is not served`,
    );
  }
  return {
    bytes,
    attestationId: entry.attestation_id,
    mediaType: entry.media_type ?? 'application/json',
    digest,
  };
}

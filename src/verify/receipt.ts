import type { LogKey } from '../cose/key.ts';
import { verifyReceipt } from '../transparency/receipt.ts';
import { verifySignedStatement } from '../transparency/statement.ts';

/**
 * SCITT receipts of records, offline (workflow step e): the receipt proves the record's signed
 * statement under a log key the verifier trusts, the statement is about this record, and the
 * record's claim about where it was published is true.
 *
 * The claim: `transparency.mode` is `dry_run` for this deployment's own log (`backend: local`) and
 * `published` for a remote SCITT service (`backend: scrapi`), docs/transparency.md. A record that
 * claims a remote publication while its receipt verifies under one of the deployment's own log
 * keys was never sent anywhere: RECEIPT_NOT_REMOTE. The verifier learns those keys from outside
 * the record (the trust bundle's `log_keys`, an export bundle's `scitt/log-keys.cbor`).
 */

export type ReceiptClaimCode = 'RECEIPT_NOT_REMOTE';

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a record's `transparency` entry says it went to a remote SCITT service. */
export function claimsRemote(transparency: unknown): boolean {
  return isObject(transparency) && (transparency.mode === 'published' || transparency.backend === 'scrapi');
}

/**
 * RECEIPT_NOT_REMOTE when `transparency` claims a remote publication but `receipt` proves
 * `statement` under one of `localLogKeys` (the deployment's own log); undefined otherwise.
 */
export function remoteClaimProblem(
  transparency: unknown,
  statement: Uint8Array,
  receipt: Uint8Array,
  localLogKeys: readonly LogKey[],
): { code: ReceiptClaimCode; message: string } | undefined {
  if (!claimsRemote(transparency) || localLogKeys.length === 0) return undefined;
  if (!verifyReceipt({ receipt, statement, logKey: localLogKeys }).ok) return undefined;
  return {
    code: 'RECEIPT_NOT_REMOTE',
    message:
      "the record claims a remote SCITT publication (mode published), but its receipt is signed by this deployment's own log key: a dry run, never sent to a remote service",
  };
}

/** A problem of a fetched record's receipt, as `service-ctl verify --log-keys` reports it. */
export interface ReceiptProblem {
  readonly code: string;
  readonly message: string;
}

/**
 * Checks the `transparency` receipt of a fetched record offline: the receipt's signature with the
 * log key, the inclusion proof up to the signed root, that the signed statement is about this
 * attestation (CWT `sub` = its id, hash-envelope payload = its digest), and its claim of where it
 * was published against `localLogKeys`. Returns problems (empty = ok).
 */
export function receiptProblems(
  record: Record<string, unknown>,
  keys: readonly LogKey[],
  localLogKeys: readonly LogKey[] = [],
): ReceiptProblem[] {
  const t = record.transparency as
    { status?: string; receipt?: string; statement?: string } | null | undefined;
  if (!t || t.status !== 'published' || !t.receipt || !t.statement)
    return [{ code: 'RECEIPT_MISSING', message: 'no published receipt' }];
  const statement = Buffer.from(t.statement, 'base64');
  const receipt = Buffer.from(t.receipt, 'base64');
  const problems: ReceiptProblem[] = [];
  try {
    const s = verifySignedStatement(statement);
    if (s.subject !== record.id)
      problems.push({
        code: 'STATEMENT_MISMATCH',
        message: `statement is about ${s.subject}, not ${String(record.id)}`,
      });
    const digest = typeof record.digest === 'string' ? record.digest.replace(/^sha256:/, '') : '';
    if (s.payload.toString('hex') !== digest)
      problems.push({ code: 'STATEMENT_MISMATCH', message: 'statement payload is not the envelope digest' });
  } catch (err) {
    problems.push({ code: 'STATEMENT_INVALID', message: (err as Error).message });
  }
  const r = verifyReceipt({ receipt, statement, logKey: keys });
  if (!r.ok) problems.push({ code: r.code, message: r.message });
  const claim = remoteClaimProblem(t, statement, receipt, localLogKeys);
  if (claim !== undefined) problems.push(claim);
  return problems;
}

import { createPublicKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { decodeKeySet, logKeyOf, type LogKey } from '../cose/key.ts';
import { verifySignedStatement } from '../transparency/statement.ts';
import { verifyReceipt } from '../transparency/receipt.ts';
import { CliError } from './command.ts';

/**
 * Log keys for offline receipt checks: the COSE Key Set the log serves at /.well-known/scitt-keys
 * (saved to a file), or a PEM public key / certificate of the log.
 */
export async function loadLogKeys(path: string): Promise<LogKey[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch {
    throw new CliError(`cannot read log keys ${path}`);
  }
  const text = bytes.toString('utf8');
  if (text.includes('-----BEGIN')) {
    try {
      return [logKeyOf(createPublicKey(text))];
    } catch (err) {
      throw new CliError(`${path}: ${(err as Error).message}`);
    }
  }
  try {
    return decodeKeySet(bytes);
  } catch (err) {
    throw new CliError(`${path}: not a COSE Key Set or PEM key (${(err as Error).message})`);
  }
}

/**
 * Checks the `transparency` receipt of a fetched envelope offline: the receipt's signature with the
 * log key, the inclusion proof up to the signed root, and that the signed statement is about this
 * attestation (CWT `sub` = its id, hash-envelope payload = its digest). Returns problems (empty = ok).
 */
export function receiptProblems(record: Record<string, unknown>, keys: readonly LogKey[]): string[] {
  const t = record.transparency as
    { status?: string; receipt?: string; statement?: string } | null | undefined;
  if (!t || t.status !== 'published' || !t.receipt || !t.statement)
    return ['RECEIPT_MISSING: no published receipt'];
  const statement = Buffer.from(t.statement, 'base64');
  const problems: string[] = [];
  try {
    const s = verifySignedStatement(statement);
    if (s.subject !== record.id)
      problems.push(`STATEMENT_MISMATCH: statement is about ${s.subject}, not ${String(record.id)}`);
    const digest = typeof record.digest === 'string' ? record.digest.replace(/^sha256:/, '') : '';
    if (s.payload.toString('hex') !== digest)
      problems.push('STATEMENT_MISMATCH: statement payload is not the envelope digest');
  } catch (err) {
    problems.push(`STATEMENT_INVALID: ${(err as Error).message}`);
  }
  const r = verifyReceipt({ receipt: Buffer.from(t.receipt, 'base64'), statement, logKey: keys });
  if (!r.ok) problems.push(`${r.code}: ${r.message}`);
  return problems;
}

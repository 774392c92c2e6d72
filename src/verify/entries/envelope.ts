import { verifyRecord, type Statement, type Trust } from '../../attest/index.ts';
import { rotationProblem, scopeProblemIn } from '../../attest/trust-bundle.ts';
import type { DsseEnvelope } from '../../vault/index.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState, OpenRecord } from '../state.ts';
import { checkCapabilities } from './capabilities.ts';
import { signerOf } from './signer.ts';

/**
 * `attestations/<id>/envelope.json`: one vault record as the API serves it. It closes the record
 * before and opens its own; the files after it in its directory (Sigstore bundle, statement,
 * receipt) and its run's AIBOM are checked against it. Its checks (workflow steps b and c): the
 * id, the digest, the DSSE signature under the signer the bundle established (signer.ts), the
 * statement and predicate, the RFC 3161 time-stamp; with the signer history, rotation and scope;
 * then its capability chains (step d).
 */

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function emptyRecord(id: string, path: string): OpenRecord {
  return {
    id,
    path,
    record: {},
    envelope: undefined,
    material: undefined,
    timestamps: [],
    statement: undefined,
    trust: undefined,
    published: undefined,
    seen: new Set(['envelope.json']),
    aibom: undefined,
  };
}

/**
 * With the signer history (the rules `verify --trust-bundle` applies to single records): the
 * certificate the record names must be one the service used for that key, not rotated away before
 * the record was signed, and a tenant's customer key must sign that tenant's namespace.
 */
function checkHistory(
  state: BundleState,
  record: Record<string, unknown>,
  path: string,
  statement: unknown,
  stamped: Date | undefined,
): void {
  const history = state.options.signerHistory;
  if (history === undefined) return;
  for (const p of [rotationProblem(record, history, stamped), scopeProblemIn(history, record, statement)])
    if (p !== undefined) state.fail(path, p.code, p.message);
}

/** The statement of a record that could not be verified (read for the checks after it, not trusted). */
function untrustedStatement(record: Record<string, unknown>): Statement | undefined {
  try {
    const env = record.envelope as DsseEnvelope;
    return JSON.parse(Buffer.from(env.payload, 'base64').toString('utf8')) as Statement;
  } catch {
    return undefined;
  }
}

/** Verifies the record under `trust`; returns its statement. */
function checkSignature(
  state: BundleState,
  record: Record<string, unknown>,
  path: string,
  trust: Trust,
): Statement | undefined {
  const result = verifyRecord(record, trust);
  for (const p of result.problems) state.fail(path, p.code, p.message);
  const stamped = result.timestamp?.trusted === true ? result.timestamp.time : undefined;
  if (stamped !== undefined) state.timestamped++;
  checkHistory(state, record, path, result.statement, stamped);
  return result.statement;
}

function publishedOf(record: Record<string, unknown>): OpenRecord['published'] {
  const t = isObject(record.transparency) ? record.transparency : undefined;
  return t?.status === 'published' && typeof t.statement === 'string' && typeof t.receipt === 'string'
    ? { statement: Buffer.from(t.statement, 'base64'), receipt: Buffer.from(t.receipt, 'base64') }
    : undefined;
}

function parseRecord(content: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed = JSON.parse(content.toString('utf8')) as unknown;
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export const envelopeEntry: EntryHandler = {
  name: 'attestation record',
  pattern: /^attestations\/([0-9a-f-]{36})\/envelope\.json$/,
  onEntry(state, entry) {
    const id = entry.match[1]!;
    const path = entry.path;
    state.closeRecord();
    state.attestations++;
    state.segmentRecords++;
    const record = parseRecord(entry.content);
    if (record === undefined) {
      state.fail(path, 'MALFORMED', 'not a JSON record');
      state.digests.push('');
      state.openRecord(emptyRecord(id, path));
      return;
    }
    if (record.id !== id)
      state.fail(path, 'RECORD_MISMATCH', `the record's id is ${String(record.id)}, not ${id}`);
    state.digests.push(typeof record.digest === 'string' ? record.digest : '');
    const { trust, material } = signerOf(state, record, path);
    const statement =
      trust !== undefined ? checkSignature(state, record, path, trust) : untrustedStatement(record);
    if (trust !== undefined) checkCapabilities(state, record, trust, path);
    const sig = isObject(record.signature) ? record.signature : {};
    const ts = isObject(sig.timestamp) ? sig.timestamp : {};
    state.openRecord({
      id,
      path,
      record,
      envelope: isObject(record.envelope) ? (record.envelope as unknown as DsseEnvelope) : undefined,
      material,
      timestamps: typeof ts.signed_timestamp === 'string' ? [{ signedTimestamp: ts.signed_timestamp }] : [],
      statement,
      trust,
      published: publishedOf(record),
      seen: new Set(['envelope.json']),
      aibom: record.kind === 'aibom' ? {} : undefined,
    });
  },
};

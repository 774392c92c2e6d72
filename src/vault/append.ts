import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { VaultError } from './errors.ts';
import { inTransaction } from './transaction.ts';
import { ensurePartitions, isNoPartition } from './partitions.ts';
import { ATTESTATION_COLUMNS, toStored, type AttestationRow } from './rows.ts';
import {
  ATTESTATION_KINDS,
  type DsseEnvelope,
  type NewAttestation,
  type SignatureMeta,
  type StoredAttestation,
} from './types.ts';
import { UuidV7Generator } from './uuidv7.ts';
import { InvariantError } from '../errors.ts';

export interface AppendOptions {
  /**
   * Runs inside the append transaction, after the rows are written and while the chain head is
   * still locked, with the rows this call inserted (not the ones it found already stored). Throwing
   * rolls the whole batch back. Meant for work that must commit atomically with the attestations,
   * such as enqueueing transparency jobs; keep it short, every other writer waits for it.
   */
  readonly inTransaction?: (client: pg.PoolClient, inserted: readonly StoredAttestation[]) => Promise<void>;
  /** Id generator; defaults to one per process. */
  readonly ids?: UuidV7Generator;
}

/** One generator per process: its state keeps ids monotonic even between appends. */
const processIds = new UuidV7Generator();

/** Columns assigned under the lock come first, so the rest of each line is encoded before it. */
const COPY_SQL =
  'COPY attestations (id, seq, prev_digest, created_at, namespace, run_id, step_id, kind, subjects, ' +
  'artifact_digests, predicate_type, policy_pack, policy_version, capability_token_ids, envelope, digest, ' +
  'signature, c2pa_manifest_ref) FROM STDIN';

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Flush the COPY buffer at this many UTF-16 units (~256 KiB), so large batches stream. */
const COPY_CHUNK = 256 * 1024;

/**
 * Appends a batch in one transaction and returns the stored rows in input order.
 *
 * Writers serialize on the chain-head row (`vault_lock_head()`, a row lock held to commit). Inside that critical
 * section the batch gets consecutive `seq` values, UUIDv7 ids greater than the last stored id,
 * `prev_digest` links (the head's digest for the first row, then each row's predecessor in the
 * batch) and one `created_at` no earlier than the head's. Because the lock is held until commit,
 * id order = seq order = commit order: a reader paging by id can never miss a row committed later.
 *
 * Rows are written with COPY (one round trip for the batch). An envelope whose digest is already
 * stored (a retry) is not stored again; its stored row is returned in its place.
 */
export async function append(
  pool: pg.Pool,
  input: readonly NewAttestation[],
  options: AppendOptions = {},
): Promise<StoredAttestation[]> {
  input.forEach(validate);
  if (input.length === 0) return [];
  // Encoding is most of the client-side cost: do it before taking the lock other writers wait on.
  const tails = input.map(copyTail);
  const ids = options.ids ?? processIds;
  const run = (): Promise<StoredAttestation[]> =>
    inTransaction(pool, (client) => appendLocked(client, input, tails, ids, options));
  try {
    return await run();
  } catch (err) {
    // The months created ahead ran out (a long stop, a clock jump): add the missing partitions
    // (migration 0019) and try once more; the failed attempt rolled back entirely.
    if (!isNoPartition(err)) throw err;
    await ensurePartitions(pool);
    return run();
  }
}

interface HeadRow {
  last_seq: string;
  last_id: string | null;
  last_digest: string;
  last_created_at: Date | null;
}

async function appendLocked(
  client: pg.PoolClient,
  input: readonly NewAttestation[],
  tails: readonly string[],
  ids: UuidV7Generator,
  options: AppendOptions,
): Promise<StoredAttestation[]> {
  const headResult = await client.query<HeadRow>({
    name: 'vault_head_lock',
    // The runtime role may not UPDATE the head, so it locks it through a function (migration 0008).
    text: 'SELECT last_seq, last_id, last_digest, last_created_at FROM vault_lock_head()',
  });
  const head = headResult.rows[0];
  // Invariant, not a caller's error: the migrations create this row (a plain Error, issue 23).
  if (head === undefined)
    throw new VaultError('MIGRATION_PENDING', 'vault_head row is missing: was migration 0001 applied?');

  // A new statement after the lock: its snapshot sees the commit of the writer we waited for.
  const digests = [...new Set(input.map((r) => r.digest))];
  const probe = await client.query<{ now: Date; existing: string[] }>({
    name: 'vault_append_probe',
    text:
      `SELECT date_trunc('milliseconds', clock_timestamp()) AS now, ` +
      'ARRAY(SELECT digest FROM attestations WHERE digest = ANY($1::text[])) AS existing',
    values: [digests],
  });
  const { now, existing } = probe.rows[0]!;
  const byDigest = new Map<string, StoredAttestation>();
  if (existing.length > 0) {
    const found = await client.query<AttestationRow>(
      `SELECT ${ATTESTATION_COLUMNS} FROM attestations WHERE digest = ANY($1::text[])`,
      [existing],
    );
    for (const r of found.rows) byDigest.set(r.digest, toStored(r));
  }

  // created_at never decreases along seq, even if the database clock steps back.
  const createdAt =
    head.last_created_at !== null && head.last_created_at.getTime() > now.getTime()
      ? head.last_created_at
      : now;
  let seq = Number(head.last_seq);
  let prevDigest = head.last_digest;
  let floor = head.last_id;
  const createdAtText = createdAt.toISOString();
  const inserted: StoredAttestation[] = [];
  const lines: string[] = [];
  for (const [i, r] of input.entries()) {
    if (byDigest.has(r.digest)) continue;
    seq += 1;
    const id = ids.next(floor);
    floor = null; // the generator's own state orders the rest of the batch
    const stored: StoredAttestation = {
      id,
      seq,
      namespace: r.namespace,
      runId: r.runId ?? null,
      stepId: r.stepId ?? null,
      kind: r.kind,
      subjects: [...r.subjects],
      artifactDigests: [...(r.artifactDigests ?? [])],
      predicateType: r.predicateType,
      policyPack: r.policyPack ?? null,
      policyVersion: r.policyVersion ?? null,
      capabilityTokenIds: [...(r.capabilityTokenIds ?? [])],
      envelope: r.envelope,
      digest: r.digest,
      prevDigest,
      signature: signatureOf(r.signature),
      c2paManifestRef: r.c2paManifestRef ?? null,
      createdAt,
    };
    lines.push(`${id}\t${seq}\t${prevDigest}\t${createdAtText}\t${tails[i]!}`);
    prevDigest = r.digest;
    byDigest.set(r.digest, stored);
    inserted.push(stored);
  }

  if (inserted.length > 0) {
    // The insert trigger (migration 0008) checks that the rows continue the chain at the head and
    // moves the head onto the last of them: no separate UPDATE, and no other way to move it.
    await copyLines(client, lines);
    if (options.inTransaction !== undefined) await options.inTransaction(client, inserted);
  }
  return input.map((r) => byDigest.get(r.digest)!);
}

async function copyLines(client: pg.PoolClient, lines: readonly string[]): Promise<void> {
  const stream = client.query(copyStreams.from(COPY_SQL));
  let buf = '';
  for (const line of lines) {
    buf += line;
    if (buf.length >= COPY_CHUNK) {
      if (!stream.write(buf)) await once(stream, 'drain');
      buf = '';
    }
  }
  stream.end(buf);
  await finished(stream);
  // Invariant, not a caller's error: COPY stores every row or fails (a plain Error, issue 23).
  if (stream.rowCount !== lines.length) {
    throw new InvariantError(`COPY stored ${stream.rowCount} rows, expected ${lines.length}`);
  }
}

/**
 * The caller-supplied columns of one row in COPY text format (tab-separated, `\N` for NULL,
 * backslash escapes), ending the line.
 */
function copyTail(r: NewAttestation): string {
  const stepId = r.stepId ?? null;
  const policyPack = r.policyPack ?? null;
  const policyVersion = r.policyVersion ?? null;
  const c2pa = r.c2paManifestRef ?? null;
  return (
    [
      text(r.namespace),
      r.runId ?? NULL,
      stepId === null ? NULL : text(stepId),
      r.kind,
      array(r.subjects),
      array(r.artifactDigests ?? []),
      text(r.predicateType),
      policyPack === null ? NULL : text(policyPack),
      policyVersion === null ? NULL : text(policyVersion),
      array(r.capabilityTokenIds ?? []),
      text(JSON.stringify(r.envelope)),
      r.digest,
      text(JSON.stringify(signatureOf(r.signature))),
      c2pa === null ? NULL : text(c2pa),
    ].join('\t') + '\n'
  );
}

const NULL = '\\N';
const COPY_SPECIAL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function text(s: string): string {
  return s.replace(COPY_SPECIAL, (c) => COPY_ESCAPES[c]!);
}

/** A text[] literal with every element quoted, then COPY-escaped. */
function array(items: readonly string[]): string {
  return text(`{${items.map((s) => `"${s.replace(/["\\]/g, '\\$&')}"`).join(',')}}`);
}

function validate(r: NewAttestation, i: number): void {
  const bad = (why: string): never => {
    throw new VaultError('INVALID_INPUT', `attestation ${i}: ${why}`);
  };
  if (typeof r.namespace !== 'string' || r.namespace === '') bad('namespace must be a non-empty string');
  if (!(ATTESTATION_KINDS as readonly string[]).includes(r.kind)) bad(`unknown kind ${String(r.kind)}`);
  if (!DIGEST.test(r.digest)) bad('digest must be sha256:<64 lowercase hex>');
  if (r.runId != null && !UUID.test(r.runId)) bad('runId must be a lowercase UUID');
  if (r.stepId != null && r.runId == null) bad('stepId needs runId');
  if (r.policyVersion != null && r.policyPack == null) bad('policyVersion needs policyPack');
  if (!Array.isArray(r.subjects) || r.subjects.length === 0) bad('subjects must be a non-empty array');
  for (const list of [r.subjects, r.artifactDigests ?? [], r.capabilityTokenIds ?? []]) {
    if (list.some((s) => typeof s !== 'string' || s === ''))
      bad('subject, digest and token lists hold non-empty strings');
  }
  if (typeof r.predicateType !== 'string' || r.predicateType === '')
    bad('predicateType must be a non-empty string');
  const e = r.envelope as Partial<DsseEnvelope> | null;
  if (
    typeof e !== 'object' ||
    e === null ||
    typeof e.payload !== 'string' ||
    typeof e.payloadType !== 'string' ||
    !Array.isArray(e.signatures) ||
    e.signatures.length === 0
  ) {
    bad('envelope must be a DSSE envelope (payload, payloadType, signatures)');
  }
  const s = r.signature as Partial<SignatureMeta> | null;
  if (
    typeof s !== 'object' ||
    s === null ||
    typeof s.algorithm !== 'string' ||
    typeof s.key_id !== 'string'
  ) {
    bad('signature needs algorithm and key_id');
  }
}

/** Exactly the stored keys, whatever else the caller's object carries. */
function signatureOf(s: SignatureMeta): SignatureMeta {
  return { algorithm: s.algorithm, key_id: s.key_id, cert_chain_ref: s.cert_chain_ref ?? null };
}

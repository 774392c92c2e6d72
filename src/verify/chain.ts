import { keyIdOf } from '../signing/signer.ts';
import { CheckpointError } from '../checkpoint/errors.ts';
import { verifyCheckpoint, type Checkpoint, type CheckpointTrust } from '../checkpoint/statement.ts';
import { assertConsistent, checkLeaves, type ChainFinding } from '../checkpoint/verify.ts';

/**
 * What a verifier holding nothing but the signer's key (and, from an earlier run, a checkpoint) can
 * establish about the whole vault through its chain API (docs/chain.md): the newest checkpoint is
 * signed, how old it is (and not older than the verifier accepts), the records as served fold to
 * its root without a gap, it extends the earlier checkpoint, and records the verifier holds are
 * where they were. `service-ctl verify --chain` is this plus files and printing (src/cli/chain.ts).
 *
 * Freshness: a checkpoint is a signed statement that can be replayed, together with the leaf list
 * it covered (a truncated list of today's records folds to yesterday's root). `fresh` asks the
 * service for a checkpoint of every record stored now and accepts nothing else (no fallback to the
 * newest stored one); `maxAgeMs` refuses a checkpoint issued longer ago. Without either, the age is
 * reported and nothing more: an old checkpoint is still a true statement about the records it
 * covers.
 */

/** A checkpoint as the API serves it (GET and POST /v1/chain/checkpoint). */
export interface CheckpointView {
  readonly tree_size: number;
  readonly root_hash: string;
  readonly statement: string;
}

/** The chain API, as the verifier uses it (the CLI adapts its HTTP client). */
export interface ChainApi {
  /** POST /v1/chain/checkpoint: the HTTP status, and the checkpoint when it is 200. */
  requestCheckpoint(): Promise<{ status: number; checkpoint?: CheckpointView; detail?: string }>;
  /** GET /v1/chain/checkpoint: the newest stored checkpoint. */
  newestCheckpoint(): Promise<CheckpointView>;
  /** GET /v1/chain/consistency: the RFC 9162 proof between two checkpointed sizes. */
  consistency(from: number, to: number): Promise<Buffer[]>;
  /** GET /v1/chain/leaves: every leaf hash in seq order, up to at least `upTo`. */
  leaves(upTo: number): AsyncIterable<{ seq: number; leafHash: Buffer }>;
}

export interface ChainCheckOptions {
  readonly trust: CheckpointTrust;
  /** An earlier checkpoint (the statement bytes) the newest must extend. */
  readonly earlier?: Buffer;
  /** seq → leaf hash of records the verifier holds. */
  readonly held?: ReadonlyMap<number, Buffer>;
  readonly fresh?: boolean;
  /** Refuse a checkpoint issued longer ago than this. */
  readonly maxAgeMs?: number;
  /** The verifier's clock (default now). */
  readonly now?: Date;
}

export interface ChainReport {
  readonly ok: string[];
  readonly findings: ChainFinding[];
  /** The newest checkpoint's statement, when it verified (what `--save-checkpoint` keeps). */
  readonly statement?: Buffer;
  readonly newest?: Checkpoint;
}

/** A signed issued_at this far ahead of the verifier's clock is clock skew; beyond it, a false time. */
export const CLOCK_SKEW_MS = 5 * 60_000;

/** `3 d 4 h`, `2 h 5 min`, `3 min 12 s`, `42 s`: the largest two units. */
export function formatAge(ms: number): string {
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1000],
  ];
  const abs = Math.max(0, Math.round(Math.abs(ms) / 1000) * 1000);
  const first = units.findIndex(([, n]) => abs >= n);
  if (first < 0) return '0 s';
  const [u1, n1] = units[first]!;
  const parts = [`${Math.floor(abs / n1)} ${u1}`];
  const next = units[first + 1];
  if (next !== undefined && Math.floor((abs % n1) / next[1]) > 0)
    parts.push(`${Math.floor((abs % n1) / next[1])} ${next[0]}`);
  return parts.join(' ');
}

/** The checkpoint to verify: a new one (fresh, or a finding), else the newest stored. */
async function checkpointToVerify(
  api: ChainApi,
  fresh: boolean,
  findings: ChainFinding[],
): Promise<CheckpointView | undefined> {
  if (!fresh) return api.newestCheckpoint();
  const answer = await api.requestCheckpoint();
  if (answer.status === 200 && answer.checkpoint !== undefined) return answer.checkpoint;
  findings.push({
    code: 'CHECKPOINT_NOT_FRESH',
    message:
      answer.status === 202
        ? 'the service did not sign a checkpoint of every record in time (202); not falling back to an older one'
        : `asking for a new checkpoint was answered ${answer.status}${answer.detail !== undefined ? ` (${answer.detail})` : ''}; not falling back to an older one`,
  });
  return undefined;
}

/** The age line of a verified checkpoint, and its findings (stale, or issued in the future). */
function ageOf(newest: Checkpoint, o: ChainCheckOptions, findings: ChainFinding[]): string {
  const now = (o.now ?? new Date()).getTime();
  const age = now - Date.parse(newest.issuedAt);
  const issued = new Date(newest.issuedAt).toISOString();
  if (age < -CLOCK_SKEW_MS) {
    findings.push({
      code: 'CHECKPOINT_INVALID',
      message: `the checkpoint says it was issued at ${issued}, ${formatAge(age)} ahead of this clock`,
    });
  } else if (o.maxAgeMs !== undefined && age > o.maxAgeMs) {
    findings.push({
      code: 'CHECKPOINT_STALE',
      message: `the checkpoint was issued at ${issued}, ${formatAge(age)} ago: older than --max-age ${formatAge(o.maxAgeMs)}`,
    });
  }
  return `issued ${issued}, ${age < 0 ? 'just now' : `${formatAge(age)} ago`}`;
}

function check<T>(findings: ChainFinding[], fn: () => T): T | undefined {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof CheckpointError)) throw err;
    findings.push({ code: err.code, message: err.message });
    return undefined;
  }
}

/** The newest checkpoint extends the earlier one (RFC 9162 consistency). */
async function checkExtends(
  api: ChainApi,
  earlier: Checkpoint,
  newest: Checkpoint,
  r: ChainReport,
): Promise<void> {
  const proof =
    earlier.treeSize <= newest.treeSize ? await api.consistency(earlier.treeSize, newest.treeSize) : [];
  const before = r.findings.length;
  check(r.findings, () => assertConsistent(earlier, newest, proof));
  if (r.findings.length === before)
    r.ok.push(
      `checkpoint ${newest.treeSize} extends your checkpoint ${earlier.treeSize} (RFC 9162 consistency)`,
    );
}

/** The served leaves fold to the signed roots, and the records held are where they were. */
async function checkRecords(
  api: ChainApi,
  newest: Checkpoint,
  earlier: Checkpoint | undefined,
  held: ReadonlyMap<number, Buffer>,
  r: ChainReport,
): Promise<void> {
  const against = [
    newest,
    ...(earlier !== undefined && earlier.treeSize <= newest.treeSize ? [earlier] : []),
  ];
  const walked = await checkLeaves(api.leaves(newest.treeSize), against, held);
  r.findings.push(...walked.findings);
  // NOT_COVERED says nothing about the served tree; every other finding does.
  if (walked.findings.every((f) => f.code === 'NOT_COVERED')) {
    r.ok.push(`${walked.count} records, gapless, fold to the signed root${earlier !== undefined ? 's' : ''}`);
    // Only the held records a signed root covers and that matched: never the whole file blindly.
    if (walked.held > 0) r.ok.push(`${walked.held} records you hold are where they were`);
  }
}

/** Verifies the vault's chain through `api`; see the module comment. */
export async function verifyChain(api: ChainApi, o: ChainCheckOptions): Promise<ChainReport> {
  const r: ChainReport = { ok: [], findings: [] };
  const view = await checkpointToVerify(api, o.fresh === true, r.findings);
  if (view === undefined) return r;
  const statement = Buffer.from(view.statement, 'base64');
  const newest = check(r.findings, () => verifyCheckpoint(statement, o.trust));
  const earlier =
    o.earlier !== undefined ? check(r.findings, () => verifyCheckpoint(o.earlier!, o.trust)) : undefined;
  if (newest === undefined) return r;
  if (newest.treeSize !== view.tree_size || newest.rootHash.toString('hex') !== view.root_hash) {
    r.findings.push({
      code: 'CHECKPOINT_INVALID',
      message: 'the served tree size or root differs from the signed one',
    });
  } else {
    const signer = 'publicKeys' in o.trust ? keyIdOf(o.trust.publicKeys[0]!) : 'the trust anchor';
    r.ok.push(`checkpoint of ${newest.treeSize} records signed (${signer}), ${ageOf(newest, o, r.findings)}`);
  }
  if (earlier !== undefined) await checkExtends(api, earlier, newest, r);
  await checkRecords(api, newest, earlier, o.held ?? new Map(), r);
  return { ...r, statement, newest };
}

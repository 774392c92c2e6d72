import type { KeyObject, X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { leafFieldsOfApiRecord, recordLeafHash } from '../checkpoint/leaf.ts';
import type { CheckpointTrust } from '../checkpoint/statement.ts';
import { verifyChain, type ChainApi, type CheckpointView } from '../verify/chain.ts';
import { ApiError, type ApiClient } from './client.ts';
import { CliError } from './command.ts';
import { pemCertificates, pemPublicKeys, readNamedFile } from './pem.ts';

/**
 * `service-ctl verify --chain`: the files and the printing around src/verify/chain.ts, which makes
 * the checks (docs/chain.md):
 *
 * 1. the newest checkpoint is signed by the trusted key, and how old it is (printed);
 * 2. the records as the vault serves them now (their leaf hashes, GET /v1/chain/leaves) are gapless
 *    and fold to the root it signs;
 * 3. with `--checkpoint FILE` (saved earlier with `--save-checkpoint`): that checkpoint verifies,
 *    the newest one extends it (RFC 9162 consistency proof from the API), and the first records
 *    still fold to its root: a record removed, reordered or relabelled since then is reported;
 * 4. with `--records FILE` (records you exported earlier, e.g. the query's NDJSON): each is still
 *    the record at its position; one beyond the newest checkpoint is NOT_COVERED (a failure: no
 *    signed root vouches for it yet), never counted among those "where they were";
 * 5. with `--fresh`: the checkpoint is one the service signed for this request (any answer but 200
 *    is CHECKPOINT_NOT_FRESH, never a fallback to the stored one); with `--max-age`: it was issued
 *    no longer ago than that (CHECKPOINT_STALE): a replayed old checkpoint with the leaf list it
 *    covered otherwise still folds.
 *
 * Exit 0 when everything holds, 1 with one `FAIL <code>` line per finding.
 */

export interface ChainOptions {
  readonly key?: readonly string[] | undefined;
  readonly 'trust-anchor'?: string | undefined;
  readonly checkpoint?: string | undefined;
  readonly 'save-checkpoint'?: string | undefined;
  readonly records?: string | undefined;
  readonly fresh?: boolean | undefined;
  readonly 'max-age'?: string | undefined;
  /** CAs from elsewhere (the trust bundle's, SERVICE_TRUST_ANCHOR), used without --key and --trust-anchor. */
  readonly anchors?: readonly X509Certificate[] | undefined;
}

/** What `--chain` says when it is given nothing to trust (exit 2). */
export const CHAIN_TRUST_MISSING =
  '--chain needs --key <signer PEM>, --trust-anchor <ca.crt> or --trust-bundle <dir> (or SERVICE_TRUST_ANCHOR)';

/** `--chain`'s files: one that cannot be read ends the check (exit 1), as it always has. */
const readFileOr = (path: string, what: string): Promise<Buffer> => readNamedFile(path, what, 1);

async function trustOf(o: ChainOptions): Promise<CheckpointTrust> {
  if (o.key !== undefined && o.key.length > 0) {
    const keys: KeyObject[] = [];
    for (const path of o.key) {
      keys.push(...pemPublicKeys(await readFileOr(path, 'key'), path));
    }
    if (keys.length === 0) throw new CliError('--key: no PEM public key or certificate', 2);
    return { publicKeys: keys };
  }
  const anchor = o['trust-anchor'];
  if (anchor === undefined && o.anchors !== undefined && o.anchors.length > 0)
    return { trustAnchors: [...o.anchors] };
  if (anchor === undefined) throw new CliError(CHAIN_TRUST_MISSING, 2);
  const certs = pemCertificates(await readFileOr(anchor, 'trust anchor'), anchor);
  if (certs.length === 0) throw new CliError(`${anchor}: no PEM certificate`, 2);
  return { trustAnchors: certs };
}

/** The chain API over the CLI's HTTP client. */
function chainApi(client: ApiClient): ChainApi {
  return {
    async requestCheckpoint() {
      try {
        const res = await client.request('POST', '/v1/chain/checkpoint?wait=30');
        if (res.status === 200) return { status: 200, checkpoint: (await res.json()) as CheckpointView };
        await res.body?.cancel();
        return { status: res.status };
      } catch (err) {
        // A problem answer (403 without `create` on attestations/chain, 404, 5xx): a finding,
        // not a reason to read the newest stored checkpoint instead.
        if (err instanceof ApiError) return { status: err.status, detail: err.problemCode };
        throw err;
      }
    },
    async newestCheckpoint() {
      try {
        return await client.json<CheckpointView>('GET', '/v1/chain/checkpoint');
      } catch (err) {
        // A young vault (the demo's, say) has none yet: say how to get one instead of only "404".
        if (err instanceof ApiError && err.status === 404 && err.problemCode === 'NOT_FOUND')
          throw new CliError(
            `${err.message}; the controller signs one every VAULT_CHECKPOINT_INTERVAL_SECONDS, and --fresh asks for one now`,
          );
        throw err;
      }
    },
    async consistency(from, to) {
      const p = await client.json<{ proof: string[] }>('GET', `/v1/chain/consistency?from=${from}&to=${to}`);
      return p.proof.map((h) => Buffer.from(h, 'hex'));
    },
    leaves: (upTo) => servedLeaves(client, upTo),
  };
}

const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** `--max-age`: `90s`, `15m`, `2h`, `7d`, or combined (`1h30m`); a usage error otherwise. */
export function parseDuration(text: string): number {
  const m = DURATION.exec(text.trim());
  if (m === null || text.trim() === '')
    throw new CliError(`--max-age ${text}: not a duration (for example 90s, 15m, 2h, 7d, 1h30m)`, 2);
  const [d, h, min, sec] = m.slice(1).map((v) => Number(v ?? 0)) as [number, number, number, number];
  return (((d * 24 + h) * 60 + min) * 60 + sec) * 1000;
}

async function* servedLeaves(
  client: ApiClient,
  upTo: number,
): AsyncGenerator<{ seq: number; leafHash: Buffer }> {
  let after = 0;
  for (;;) {
    const page = await client.page<{
      items: { seq: number; leaf_hash: string }[];
      next_after_seq: number | null;
    }>('GET', `/v1/chain/leaves?after_seq=${after}&limit=10000`, undefined, 'items');
    for (const i of page.items) yield { seq: i.seq, leafHash: Buffer.from(i.leaf_hash, 'hex') };
    const last = page.items.at(-1);
    if (page.next_after_seq === null || last === undefined || last.seq >= upTo) return;
    after = page.next_after_seq;
  }
}

/** seq → leaf hash of records the verifier holds (one JSON record, an array or NDJSON). */
async function heldRecords(
  path: string,
  parse: (text: string, path: string) => unknown[],
): Promise<Map<number, Buffer>> {
  const out = new Map<number, Buffer>();
  for (const r of parse((await readFileOr(path, 'records')).toString('utf8'), path)) {
    const fields =
      typeof r === 'object' && r !== null ? leafFieldsOfApiRecord(r as Record<string, unknown>) : undefined;
    if (fields === undefined)
      throw new CliError(`${path}: a record lacks the fields of its leaf (seq, id, digest, labels)`);
    out.set(fields.seq, recordLeafHash(fields));
  }
  return out;
}

export async function verifyChainCli(
  o: ChainOptions,
  client: ApiClient,
  parseRecords: (text: string, path: string) => unknown[],
): Promise<number> {
  const trust = await trustOf(o);
  const maxAgeMs = o['max-age'] !== undefined ? parseDuration(o['max-age']) : undefined;
  const earlier = o.checkpoint !== undefined ? await readFileOr(o.checkpoint, 'checkpoint') : undefined;
  const held = o.records !== undefined ? await heldRecords(o.records, parseRecords) : undefined;
  const r = await verifyChain(chainApi(client), {
    trust,
    fresh: o.fresh === true,
    ...(earlier !== undefined ? { earlier } : {}),
    ...(held !== undefined ? { held } : {}),
    ...(maxAgeMs !== undefined ? { maxAgeMs } : {}),
  });
  for (const line of r.ok) process.stdout.write(`OK    ${line}\n`);
  for (const f of r.findings) process.stdout.write(`FAIL  ${f.code}: ${f.message}\n`);
  if (r.findings.length === 0 && o['save-checkpoint'] !== undefined && r.statement !== undefined) {
    await writeFile(o['save-checkpoint'], r.statement);
    process.stdout.write(`saved checkpoint ${r.newest?.treeSize ?? ''} to ${o['save-checkpoint']}\n`);
  }
  process.stdout.write(
    r.findings.length === 0 ? 'chain verified\n' : `chain NOT verified (${r.findings.length} problem(s))\n`,
  );
  return r.findings.length === 0 ? 0 : 1;
}

import { X509Certificate, createPublicKey, type KeyObject } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { CheckpointError } from '../checkpoint/errors.ts';
import { leafFieldsOfApiRecord, recordLeafHash } from '../checkpoint/leaf.ts';
import { verifyCheckpoint, type Checkpoint, type CheckpointTrust } from '../checkpoint/statement.ts';
import { assertConsistent, checkLeaves, type ChainFinding } from '../checkpoint/verify.ts';
import { keyIdOf } from '../signing/signer.ts';
import type { ApiClient } from './client.ts';
import { CliError } from './command.ts';

/**
 * `service-ctl verify --chain`: what a verifier holding nothing but the signer's key (and, from an
 * earlier run, a checkpoint) can establish about the whole vault (docs/chain.md):
 *
 * 1. the newest checkpoint is signed by the trusted key;
 * 2. the records as the vault serves them now (their leaf hashes, GET /v1/chain/leaves) are gapless
 *    and fold to the root it signs;
 * 3. with `--checkpoint FILE` (saved earlier with `--save-checkpoint`): that checkpoint verifies,
 *    the newest one extends it (RFC 9162 consistency proof from the API), and the first records
 *    still fold to its root: a record removed, reordered or relabelled since then is reported;
 * 4. with `--records FILE` (records you exported earlier, e.g. the query's NDJSON): each is still
 *    the record at its position; one beyond the newest checkpoint is NOT_COVERED (a failure: no
 *    signed root vouches for it yet), never counted among those "where they were".
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
}

interface CheckpointView {
  tree_size: number;
  root_hash: string;
  statement: string;
}

async function readFileOr(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new CliError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

async function trustOf(o: ChainOptions): Promise<CheckpointTrust> {
  if (o.key !== undefined && o.key.length > 0) {
    const keys: KeyObject[] = [];
    for (const path of o.key) {
      const pem = (await readFileOr(path, 'key')).toString('utf8');
      for (const b of pem.match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g) ?? []) {
        keys.push(b.includes('CERTIFICATE') ? new X509Certificate(b).publicKey : createPublicKey(b));
      }
    }
    if (keys.length === 0) throw new CliError('--key: no PEM public key or certificate', 2);
    return { publicKeys: keys };
  }
  const anchor = o['trust-anchor'];
  if (anchor === undefined)
    throw new CliError('--chain needs --key <signer PEM> or --trust-anchor <ca.crt>', 2);
  const pem = (await readFileOr(anchor, 'trust anchor')).toString('utf8');
  const certs = (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (b) => new X509Certificate(b),
  );
  if (certs.length === 0) throw new CliError(`${anchor}: no PEM certificate`, 2);
  return { trustAnchors: certs };
}

/** The newest checkpoint (asked for first with --fresh). */
async function newestCheckpoint(client: ApiClient, fresh: boolean): Promise<CheckpointView> {
  if (fresh) {
    const res = await client.request('POST', '/v1/chain/checkpoint?wait=30');
    if (res.status === 200) return (await res.json()) as CheckpointView;
    await res.body?.cancel();
  }
  return client.json<CheckpointView>('GET', '/v1/chain/checkpoint');
}

async function* servedLeaves(
  client: ApiClient,
  upTo: number,
): AsyncGenerator<{ seq: number; leafHash: Buffer }> {
  let after = 0;
  for (;;) {
    const page = await client.json<{
      items: { seq: number; leaf_hash: string }[];
      next_after_seq: number | null;
    }>('GET', `/v1/chain/leaves?after_seq=${after}&limit=10000`);
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
  const findings: ChainFinding[] = [];
  const ok: string[] = [];
  const check = <T>(fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (err) {
      if (!(err instanceof CheckpointError)) throw err;
      findings.push({ code: err.code, message: err.message });
      return undefined;
    }
  };

  const view = await newestCheckpoint(client, o.fresh === true);
  const statement = Buffer.from(view.statement, 'base64');
  const newest = check(() => verifyCheckpoint(statement, trust));
  const earlierBytes = o.checkpoint !== undefined ? await readFileOr(o.checkpoint, 'checkpoint') : undefined;
  const earlier = earlierBytes !== undefined ? check(() => verifyCheckpoint(earlierBytes, trust)) : undefined;
  if (newest !== undefined) {
    if (newest.treeSize !== view.tree_size || newest.rootHash.toString('hex') !== view.root_hash) {
      findings.push({
        code: 'CHECKPOINT_INVALID',
        message: 'the served tree size or root differs from the signed one',
      });
    } else {
      const signer = 'publicKeys' in trust ? keyIdOf(trust.publicKeys[0]!) : 'the trust anchor';
      ok.push(`checkpoint of ${newest.treeSize} records signed (${signer})`);
    }
  }
  if (newest !== undefined && earlier !== undefined) {
    let proof: Buffer[] = [];
    if (earlier.treeSize <= newest.treeSize) {
      const p = await client.json<{ proof: string[] }>(
        'GET',
        `/v1/chain/consistency?from=${earlier.treeSize}&to=${newest.treeSize}`,
      );
      proof = p.proof.map((h) => Buffer.from(h, 'hex'));
    }
    const before = findings.length;
    check(() => assertConsistent(earlier, newest, proof));
    if (findings.length === before)
      ok.push(
        `checkpoint ${newest.treeSize} extends your checkpoint ${earlier.treeSize} (RFC 9162 consistency)`,
      );
  }
  if (newest !== undefined) {
    const expected =
      o.records !== undefined ? await heldRecords(o.records, parseRecords) : new Map<number, Buffer>();
    const against: Checkpoint[] = [
      newest,
      ...(earlier !== undefined && earlier.treeSize <= newest.treeSize ? [earlier] : []),
    ];
    const walked = await checkLeaves(servedLeaves(client, newest.treeSize), against, expected);
    findings.push(...walked.findings);
    // NOT_COVERED says nothing about the served tree; every other finding does.
    if (walked.findings.every((f) => f.code === 'NOT_COVERED')) {
      ok.push(`${walked.count} records, gapless, fold to the signed root${earlier !== undefined ? 's' : ''}`);
      // Only the held records a signed root covers and that matched: never the whole file blindly.
      if (walked.held > 0) ok.push(`${walked.held} records you hold are where they were`);
    }
  }

  for (const line of ok) process.stdout.write(`OK    ${line}\n`);
  for (const f of findings) process.stdout.write(`FAIL  ${f.code}: ${f.message}\n`);
  if (findings.length === 0 && o['save-checkpoint'] !== undefined) {
    await writeFile(o['save-checkpoint'], statement);
    process.stdout.write(`saved checkpoint ${newest?.treeSize ?? ''} to ${o['save-checkpoint']}\n`);
  }
  process.stdout.write(
    findings.length === 0 ? 'chain verified\n' : `chain NOT verified (${findings.length} problem(s))\n`,
  );
  return findings.length === 0 ? 0 : 1;
}

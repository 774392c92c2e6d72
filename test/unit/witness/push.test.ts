import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { signCheckpoint } from '../../../src/tlog/checkpoint.ts';
import { parseWitnessVkey } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner } from '../../../src/tlog/note.ts';
import { addCheckpointBody, createWitnessClient } from '../../../src/witness/client.ts';
import { pushCheckpoint, type PushInput } from '../../../src/witness/push.ts';
import { fakeWitness } from './fake-witness.ts';

const ORIGIN = 'vault.test/vault';

function tree(n: number, salt = ''): MemoryTree {
  const t = new MemoryTree();
  for (let i = 0; i < n; i++) t.append(Buffer.from(`${salt}record ${i}`));
  return t;
}

function setup() {
  const log = ed25519NoteSigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
  const witness = fakeWitness();
  witness.addLog(ORIGIN, log.vkey);
  const client = createWitnessClient({ url: 'http://witness.test', timeoutMs: 1000, fetch: witness.fetch });
  const push = (t: MemoryTree, knownSize: number, over: Partial<PushInput> = {}) =>
    pushCheckpoint({
      client,
      witness: parseWitnessVkey(witness.vkey),
      note: signCheckpoint({ origin: ORIGIN, treeSize: t.size, rootHash: t.root() }, log),
      treeSize: t.size,
      knownSize,
      consistencyProof: (m) => Promise.resolve(t.consistencyProof(m)),
      ...over,
    });
  return { log, witness, client, push };
}

describe('pushing checkpoints to a witness (c2sp.org/tlog-witness)', () => {
  it('gets a cosignature from size 0, then from the size it cosigned with a consistency proof', async () => {
    const { witness, push } = setup();
    const first = await push(tree(3), 0);
    expect(first).toMatchObject({ kind: 'cosigned', oldSize: 0, conflicts: [] });
    expect(witness.requests[0]!.startsWith('old 0\n\nvault.test/vault\n3\n')).toBe(true);
    const second = await push(tree(10), 3);
    expect(second).toMatchObject({ kind: 'cosigned', oldSize: 3 });
    // old 3, then the RFC 9162 proof from 3 to 10 (3 hashes), a blank line, the checkpoint
    expect(witness.requests[1]!.split('\n\n')[0]!.split('\n')).toHaveLength(
      1 + tree(10).consistencyProof(3).length,
    );
    expect(witness.state(ORIGIN)?.size).toBe(10);
  });

  it('on 409 sends again from the size the witness names', async () => {
    const { witness, push } = setup();
    await push(tree(10), 0);
    const out = await push(tree(15), 0); // this log lost track of what the witness holds
    expect(out).toMatchObject({ kind: 'cosigned', oldSize: 10, conflicts: [10] });
    expect(witness.requests.map((r) => r.split('\n', 1)[0])).toEqual(['old 0', 'old 0', 'old 10']);
  });

  it('a second tree of the same size is refused as inconsistent (split view)', async () => {
    const { push } = setup();
    expect((await push(tree(15), 0)).kind).toBe('cosigned');
    const fork = await push(tree(15, 'other '), 0);
    expect(fork).toMatchObject({ kind: 'inconsistent', status: 422, oldSize: 15, conflicts: [15] });
    // and a longer fork: its proof from 15 does not lead from the witness's root
    const longer = await push(tree(20, 'other '), 15);
    expect(longer).toMatchObject({ kind: 'inconsistent', status: 422, oldSize: 15 });
  });

  it('a witness that holds a larger tree than ours: ahead, nothing sent again', async () => {
    const { witness, push } = setup();
    await push(tree(15), 0);
    const out = await push(tree(5), 0);
    expect(out).toMatchObject({ kind: 'ahead', witnessSize: 15 });
    expect(witness.requests).toHaveLength(2);
  });

  it('an unknown log is rejected (configuration), not inconsistent', async () => {
    const { push } = setup();
    const other = ed25519NoteSigner('vault.test/other', generateKeyPairSync('ed25519').privateKey);
    const t = tree(2);
    const out = await push(t, 0, {
      note: signCheckpoint({ origin: 'vault.test/other', treeSize: 2, rootHash: t.root() }, other),
    });
    expect(out).toMatchObject({ kind: 'rejected', status: 404 });
  });

  it('refuses a 200 whose cosignature is not the configured witness key', async () => {
    const { push, log } = setup();
    const impostor = fakeWitness('witness.test/w1'); // same name, another key
    impostor.addLog(ORIGIN, log.vkey);
    const t = tree(3);
    await expect(
      push(t, 0, {
        client: createWitnessClient({ url: 'http://x', timeoutMs: 1000, fetch: impostor.fetch }),
      }),
    ).rejects.toMatchObject({ code: 'WITNESS_PROTOCOL' });
  });
});

describe('the wire client', () => {
  const answer = (status: number, body: string, type = 'text/plain') =>
    (() =>
      Promise.resolve(new Response(body, { status, headers: { 'content-type': type } }))) as typeof fetch;
  const req = { oldSize: 0, proof: [], checkpoint: 'o\n0\nAAAA\n\n— o AAAAAAAA\n' };

  it('writes the request body of the spec', () => {
    expect(addCheckpointBody({ oldSize: 5, proof: [Buffer.alloc(32, 1)], checkpoint: 'C\n' })).toBe(
      `old 5\n${Buffer.alloc(32, 1).toString('base64')}\n\nC\n`,
    );
    expect(() =>
      addCheckpointBody({
        oldSize: 1,
        proof: Array.from({ length: 64 }, () => Buffer.alloc(32)),
        checkpoint: 'C\n',
      }),
    ).toThrow(RangeError);
  });

  it('maps answers to data or typed errors', async () => {
    const client = (f: typeof fetch) => createWitnessClient({ url: 'http://w/', timeoutMs: 500, fetch: f });
    await expect(client(answer(409, '12\n', 'text/x.tlog.size')).addCheckpoint(req)).resolves.toEqual({
      status: 409,
      size: 12,
    });
    await expect(client(answer(409, '12\n')).addCheckpoint(req)).rejects.toMatchObject({
      code: 'WITNESS_PROTOCOL',
    });
    await expect(client(answer(409, '012\n', 'text/x.tlog.size')).addCheckpoint(req)).rejects.toMatchObject({
      code: 'WITNESS_PROTOCOL',
    });
    await expect(client(answer(200, 'not a signature\n')).addCheckpoint(req)).rejects.toMatchObject({
      code: 'WITNESS_PROTOCOL',
    });
    await expect(client(answer(503, 'down')).addCheckpoint(req)).rejects.toMatchObject({
      code: 'WITNESS_UNAVAILABLE',
    });
    await expect(client(answer(422, 'bad consistency proof\n')).addCheckpoint(req)).resolves.toEqual({
      status: 422,
      body: 'bad consistency proof',
    });
    const refused = (() => Promise.reject(new TypeError('fetch failed'))) as typeof fetch;
    await expect(client(refused).addCheckpoint(req)).rejects.toMatchObject({ code: 'WITNESS_UNAVAILABLE' });
    const hangs = ((_u: unknown, init?: RequestInit) =>
      new Promise((_r, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal!.reason as Error)),
      )) as typeof fetch;
    await expect(client(hangs).addCheckpoint(req)).rejects.toMatchObject({
      code: 'WITNESS_UNAVAILABLE',
      message: /500 ms/,
    });
  });
});

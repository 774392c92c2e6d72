import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signCheckpoint } from '../../../src/checkpoint/statement.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { formatAge, verifyChain, type ChainApi, type CheckpointView } from '../../../src/verify/chain.ts';
import { parseDuration } from '../../../src/cli/chain.ts';

/**
 * src/verify/chain.ts against a chain API that lies (issue 28 item 5): `--fresh` took any answer
 * but 200 as a reason to read the stored checkpoint instead, and nothing looked at `issued_at`, so
 * a replayed old checkpoint with the leaf list it covered passed as "chain verified".
 */
let signer: KeySigner;
const tree = new MemoryTree();
const leaves: Buffer[] = [];
const NOW = new Date('2026-06-01T12:00:00Z');

beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
  for (let i = 0; i < 12; i++) {
    const leaf = Buffer.alloc(32, i + 1);
    leaves.push(leaf);
    tree.appendLeafHash(leaf);
  }
});

function checkpointOf(size: number, issuedAt: Date): CheckpointView {
  const statement = signCheckpoint(
    { treeSize: size, rootHash: tree.root(size), lastId: randomUUID(), issuedAt: issuedAt.toISOString() },
    signer,
    signer.caCertificates,
  );
  return {
    tree_size: size,
    root_hash: tree.root(size).toString('hex'),
    statement: statement.toString('base64'),
  };
}

/** A chain API answering POST with `post`, GET with `stored`, and the first `served` leaves. */
function api(opts: {
  post: { status: number; checkpoint?: CheckpointView };
  stored: CheckpointView;
  served?: number;
}): ChainApi & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    requestCheckpoint: () => {
      calls.push('POST');
      return Promise.resolve(opts.post);
    },
    newestCheckpoint: () => {
      calls.push('GET');
      return Promise.resolve(opts.stored);
    },
    consistency: (from, to) => Promise.resolve(tree.consistencyProof(from, to)),
    async *leaves() {
      for (const [i, leafHash] of leaves.slice(0, opts.served ?? leaves.length).entries())
        yield await Promise.resolve({ seq: i + 1, leafHash });
    },
  };
}

const trust = () => ({ publicKeys: [signer.publicKey] });
const codes = (r: { findings: { code: string }[] }) => r.findings.map((f) => f.code);

describe('verify --chain: fresh and old checkpoints', () => {
  it('a new checkpoint: verified, its age printed', async () => {
    const fresh = checkpointOf(12, new Date(NOW.getTime() - 3_000));
    const a = api({ post: { status: 200, checkpoint: fresh }, stored: checkpointOf(9, new Date(0)) });
    const r = await verifyChain(a, { trust: trust(), fresh: true, maxAgeMs: 60_000, now: NOW });
    expect(r.findings).toEqual([]);
    expect(r.ok[0]).toMatch(
      /^checkpoint of 12 records signed \(sha256:[0-9a-f]+\), issued 2026-06-01T11:59:57\.000Z, 3 s ago$/,
    );
    expect(a.calls).toEqual(['POST']);
  });

  it('--fresh answered 202, 403 or 503: CHECKPOINT_NOT_FRESH, and the stored checkpoint is never read', async () => {
    for (const status of [202, 403, 404, 503]) {
      const a = api({ post: { status }, stored: checkpointOf(9, NOW) });
      const r = await verifyChain(a, { trust: trust(), fresh: true, now: NOW });
      expect(codes(r), String(status)).toEqual(['CHECKPOINT_NOT_FRESH']);
      expect(r.ok).toEqual([]);
      expect(a.calls).toEqual(['POST']);
    }
  });

  it('a replayed old checkpoint with the leaf list it covered: folds (a true statement about 9 records), but its age shows and --max-age refuses it', async () => {
    const old = checkpointOf(9, new Date(NOW.getTime() - 3 * 86_400_000 - 3_600_000));
    const replay = api({ post: { status: 200, checkpoint: old }, stored: old, served: 9 });
    const shown = await verifyChain(replay, { trust: trust(), now: NOW });
    expect(shown.findings).toEqual([]);
    expect(shown.ok[0]).toContain('3 d 1 h ago');
    const refused = await verifyChain(replay, {
      trust: trust(),
      fresh: true,
      maxAgeMs: 15 * 60_000,
      now: NOW,
    });
    expect(codes(refused)).toEqual(['CHECKPOINT_STALE']);
    expect(refused.findings[0]!.message).toBe(
      'the checkpoint was issued at 2026-05-29T11:00:00.000Z, 3 d 1 h ago: older than --max-age 15 min',
    );
  });

  it('a checkpoint issued beyond the clock skew in the future is not believed', async () => {
    const future = checkpointOf(12, new Date(NOW.getTime() + 3_600_000));
    const r = await verifyChain(api({ post: { status: 200, checkpoint: future }, stored: future }), {
      trust: trust(),
      now: NOW,
    });
    expect(codes(r)).toEqual(['CHECKPOINT_INVALID']);
    const skewed = checkpointOf(12, new Date(NOW.getTime() + 60_000));
    const s = await verifyChain(api({ post: { status: 200 }, stored: skewed }), { trust: trust(), now: NOW });
    expect(s.findings).toEqual([]);
    expect(s.ok[0]).toContain('just now');
  });

  it('with an earlier checkpoint: the new one must extend it', async () => {
    const earlier = Buffer.from(checkpointOf(9, new Date(NOW.getTime() - 86_400_000)).statement, 'base64');
    const r = await verifyChain(
      api({ post: { status: 200, checkpoint: checkpointOf(12, NOW) }, stored: checkpointOf(12, NOW) }),
      { trust: trust(), earlier, fresh: true, now: NOW },
    );
    expect(r.findings).toEqual([]);
    expect(r.ok).toContain('checkpoint 12 extends your checkpoint 9 (RFC 9162 consistency)');
  });
});

describe('durations and ages', () => {
  it('--max-age takes d, h, m, s and their combinations; anything else is a usage error', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    for (const bad of ['', '15', '1.5h', '-1h', 'h', '30m1h', '1 h'])
      expect(() => parseDuration(bad), bad).toThrow(expect.objectContaining({ exitCode: 2 }));
  });

  it('ages print their two largest units', () => {
    expect(formatAge(0)).toBe('0 s');
    expect(formatAge(42_000)).toBe('42 s');
    expect(formatAge(192_000)).toBe('3 min 12 s');
    expect(formatAge(7_500_000)).toBe('2 h 5 min');
    expect(formatAge(86_400_000)).toBe('1 d');
  });
});

import { describe, expect, it } from 'vitest';
import { acceptsLoss, failureLevel, supersedes } from '../../../src/checkpoint/checkpointer.ts';

// The checkpointer's decisions about the checkpoint kept outside the database (the round itself
// runs against a real vault in test/integration/failover/ and test/integration/api/chain*.test.ts).

const root = (b: number): Buffer => Buffer.alloc(32, b);
const kept = { treeSize: 10, rootHash: root(0xab) };

describe('acceptsLoss', () => {
  it('only for the kept checkpoint the operator named, size and root both', () => {
    const hex = root(0xab).toString('hex');
    expect(acceptsLoss({ treeSize: 10, rootHash: hex }, kept)).toBe(true);
    expect(acceptsLoss({ treeSize: 11, rootHash: hex }, kept)).toBe(false);
    expect(acceptsLoss({ treeSize: 10, rootHash: root(2).toString('hex') }, kept)).toBe(false);
    // Upper-case hex is not what VAULT_ACCEPT_LOST_CHECKPOINT parses to: no match, nothing accepted.
    expect(acceptsLoss({ treeSize: 10, rootHash: hex.toUpperCase() }, kept)).toBe(false);
    expect(acceptsLoss(undefined, kept)).toBe(false);
    expect(acceptsLoss({ treeSize: 10, rootHash: hex }, null)).toBe(false);
  });
});

describe('supersedes', () => {
  it('keeps a larger checkpoint, never a smaller or equal one over the same history', () => {
    expect(supersedes({ treeSize: 11, rootHash: root(3) }, kept, false)).toBe(true);
    expect(supersedes({ treeSize: 10, rootHash: root(0xab) }, kept, false)).toBe(false);
    expect(supersedes({ treeSize: 9, rootHash: root(3) }, kept, false)).toBe(false);
    // A different root of the same size without an accepted loss is never kept over the old one.
    expect(supersedes({ treeSize: 10, rootHash: root(3) }, kept, false)).toBe(false);
    expect(supersedes({ treeSize: 1, rootHash: root(3) }, null, false)).toBe(true);
  });

  it('after an accepted loss, keeps the first checkpoint of the new history, even a smaller one', () => {
    expect(supersedes({ treeSize: 7, rootHash: root(3) }, kept, true)).toBe(true);
    expect(supersedes({ treeSize: 10, rootHash: root(0xab) }, kept, true)).toBe(false);
  });
});

describe('failureLevel', () => {
  it('is an error when the history changed, a warning for a passing fault', () => {
    expect(['TREE_DIVERGED', 'CHAIN_GAP', 'HISTORY_LOST'].map(failureLevel)).toEqual([
      'error',
      'error',
      'error',
    ]);
    expect(['VAULT_UNAVAILABLE', 'ERROR', 'REMOTE_UNAVAILABLE'].map(failureLevel)).toEqual([
      'warn',
      'warn',
      'warn',
    ]);
  });
});

import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryTree } from '../../../src/transparency/merkle.ts';
import { openCheckpoint } from '../../../src/tlog/checkpoint.ts';
import { ed25519NoteSigner, ed25519NoteVerifier } from '../../../src/tlog/note.ts';
import type { StoredNote, TlogRepository } from '../../../src/vault/index.ts';
import type { WitnessedLog } from '../../../src/witness/logs.ts';
import { noteOf } from '../../../src/witness/witnesser.ts';

const ORIGIN = 'v.test/v1/tlog/vault';

/** The notes table as the database keeps it: one note per size, another note of a size refused. */
function memoryNotes(): Pick<TlogRepository, 'addCheckpoint' | 'checkpoint'> & { rows: StoredNote[] } {
  const rows: StoredNote[] = [];
  return {
    rows,
    addCheckpoint(n) {
      const same = rows.find((r) => r.treeSize === n.treeSize);
      if (same !== undefined && same.note !== n.note)
        return Promise.reject(new Error('another note of this size'));
      if (same === undefined) rows.push({ ...n, createdAt: new Date(), cosignatures: [] });
      return Promise.resolve();
    },
    checkpoint(_log, size) {
      const sorted = [...rows].sort((a, b) => b.treeSize - a.treeSize);
      return Promise.resolve(
        (size === undefined ? sorted[0] : sorted.find((r) => r.treeSize === size)) ?? null,
      );
    },
  };
}

function logOver(tree: { t: MemoryTree }): WitnessedLog {
  return {
    name: 'vault',
    origin: ORIGIN,
    current: () =>
      Promise.resolve(tree.t.size === 0 ? null : { treeSize: tree.t.size, rootHash: tree.t.root() }),
    consistencyProof: (m, n) => Promise.resolve(tree.t.consistencyProof(m, n)),
  };
}

const grow = (t: MemoryTree, n: number, salt = '') => {
  for (let i = t.size; i < n; i++) t.append(Buffer.from(`${salt}${i}`));
  return t;
};

describe('the notes the witnessing loop signs', () => {
  const key = generateKeyPairSync('ed25519').privateKey;
  const deps = (notes: ReturnType<typeof memoryNotes>) => ({
    vault: { tlog: notes } as never,
    signer: (origin: string) => ed25519NoteSigner(origin, key),
  });

  it('signs a note when the tree grew, none when it did not, each extending the last', async () => {
    const notes = memoryNotes();
    const tree = { t: grow(new MemoryTree(), 3) };
    const first = await noteOf(deps(notes), logOver(tree));
    expect(first?.treeSize).toBe(3);
    expect((await noteOf(deps(notes), logOver(tree)))?.note).toBe(first!.note);
    grow(tree.t, 10);
    const second = await noteOf(deps(notes), logOver(tree));
    expect(second?.treeSize).toBe(10);
    expect(notes.rows).toHaveLength(2);
    const { checkpoint } = openCheckpoint(
      second!.note,
      [ed25519NoteVerifier(ed25519NoteSigner(ORIGIN, key).vkey)],
      ORIGIN,
    );
    expect(checkpoint.rootHash.equals(tree.t.root())).toBe(true);
  });

  it('refuses to sign over a tree rewritten under it (larger, or of the same size), or one that shrank', async () => {
    const notes = memoryNotes();
    const tree = { t: grow(new MemoryTree(), 5) };
    await noteOf(deps(notes), logOver(tree));
    tree.t = grow(new MemoryTree(), 8, 'rewritten ');
    await expect(noteOf(deps(notes), logOver(tree))).rejects.toMatchObject({
      code: 'CHECKPOINT_INCONSISTENT',
    });
    tree.t = grow(new MemoryTree(), 5, 'rewritten ');
    await expect(noteOf(deps(notes), logOver(tree))).rejects.toMatchObject({
      code: 'CHECKPOINT_INCONSISTENT',
    });
    tree.t = grow(new MemoryTree(), 4);
    await expect(noteOf(deps(notes), logOver(tree))).rejects.toMatchObject({
      code: 'CHECKPOINT_INCONSISTENT',
    });
    expect(notes.rows.map((r) => r.treeSize)).toEqual([5]);
  });

  it('an empty tree: no note', async () => {
    const notes = memoryNotes();
    expect(await noteOf(deps(notes), logOver({ t: new MemoryTree() }))).toBeNull();
  });
});

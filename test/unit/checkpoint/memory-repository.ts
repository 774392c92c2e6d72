import { randomBytes, randomUUID } from 'node:crypto';
import type { LeafFields } from '../../../src/checkpoint/leaf.ts';
import type {
  CheckpointRepository,
  LeafRecord,
  StoredCheckpoint,
  TreeNode,
} from '../../../src/vault/index.ts';

/**
 * An in-memory CheckpointRepository for unit tests of the tree extension logic (the real one is
 * PostgreSQL, test/integration/api/chain.test.ts). It keeps what the SQL functions would refuse
 * out of scope: it stores what it is given.
 */
export function memoryCheckpoints(): CheckpointRepository & {
  appendRecord(): LeafFields;
  stored(): Map<string, Buffer>;
} {
  const records: LeafRecord[] = [];
  const nodes = new Map<string, Buffer>();
  const checkpoints: StoredCheckpoint[] = [];
  return {
    appendRecord() {
      const r: LeafRecord = {
        seq: records.length + 1,
        id: randomUUID(),
        digest: `sha256:${randomBytes(32).toString('hex')}`,
        namespace: 'team-a',
        runId: null,
        stepId: null,
        kind: 'run',
        subjects: ['run:x'],
        createdAt: new Date(1_767_225_600_000 + records.length),
      };
      records.push(r);
      return {
        seq: r.seq,
        id: r.id,
        digest: r.digest,
        namespace: r.namespace,
        kind: r.kind,
        run_id: null,
        step_id: null,
        subjects: r.subjects,
        created_at: r.createdAt.toISOString(),
      };
    },
    stored: () => nodes,
    head: () => Promise.resolve({ seq: records.length, id: records.at(-1)?.id ?? null }),
    leaves: (after, until, limit) =>
      Promise.resolve(records.filter((r) => r.seq > after && r.seq <= until).slice(0, limit)),
    nodes: (want) =>
      Promise.resolve(
        want.flatMap((n): TreeNode[] => {
          const hash = nodes.get(`${n.level}/${n.index}`);
          return hash === undefined ? [] : [{ ...n, hash }];
        }),
      ),
    addNodes(add) {
      for (const n of add) nodes.set(`${n.level}/${n.index}`, n.hash);
      return Promise.resolve();
    },
    add(c) {
      checkpoints.push({ ...c, createdAt: new Date(), receipt: null });
      return Promise.resolve();
    },
    get: (size) =>
      Promise.resolve(
        (size === undefined ? checkpoints.at(-1) : checkpoints.find((c) => c.treeSize === size)) ?? null,
      ),
    unpublished: () => Promise.resolve(checkpoints.filter((c) => c.receipt === null)),
    addReceipt: () => Promise.resolve(),
    request: () => Promise.resolve(),
  };
}

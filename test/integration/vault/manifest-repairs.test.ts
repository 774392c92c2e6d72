/**
 * Manifest repair requests on the real PostgreSQL (runtime role): a download that read the artifact
 * before a repair completed reports the old manifest missing again; it must get the completed
 * repair back, not open a second one (which would re-sign once more and put yet another manifest in
 * force: the flake of operator/repair.test.ts on 2026-11-24, whose Event named one new manifest
 * while the download served another).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepairRequest } from '../../../src/vault/index.ts';
import { setupVault, type TestVault } from './helpers.ts';

let t: TestVault;
const digest = (c: string): string => `sha256:${c.repeat(64)}`;

beforeAll(async () => {
  t = await setupVault('manifest_repairs');
});

afterAll(async () => {
  await t?.close();
});

async function artifact(): Promise<string> {
  const runId = randomUUID();
  await t.pool.query(
    'INSERT INTO artifacts (run_id, kind, namespace, object_key, digest, metadata) VALUES ($1, $2, $3, $4, $5, $6)',
    [runId, 'aibom', 'team-a', `runs/team-a/${runId}/aibom.json`, digest('a'), { kind: 'aibom' }],
  );
  return runId;
}

const missing = (runId: string, replaces: string): RepairRequest => ({
  runId,
  kind: 'aibom',
  namespace: 'team-a',
  reason: 'missing',
  detail: 'no C2PA manifest is stored',
  replacesKey: `runs/team-a/${runId}/aibom.c2pa`,
  replacesDigest: replaces,
  requestedBy: 'alice',
  object: `runs/team-a/${runId}/aibom.json`,
  attestationIds: [],
});

const audit = { actor: 'controller', namespace: 'team-a', object: 'o', attestationIds: [] };

describe('manifest repair requests', () => {
  it('a request naming a manifest a completed repair replaced gets that repair, not a new one', async () => {
    const runId = await artifact();
    const first = await t.vault.manifestRepairs.request(missing(runId, digest('1')));
    expect(first.created).toBe(true);
    // Concurrent downloads join the open request.
    const joined = await t.vault.manifestRepairs.request(missing(runId, digest('1')));
    expect(joined).toMatchObject({ created: false, repair: { id: first.repair.id, state: 'queued' } });
    const done = await t.vault.manifestRepairs.complete(
      first.repair.id,
      { key: `runs/team-a/${runId}/aibom.2.c2pa`, digest: digest('2'), label: 'urn:uuid:x' },
      audit,
    );
    expect(done?.state).toBe('done');

    // A download that read the artifact before the completion: it still sees manifest 1 missing.
    const stale = await t.vault.manifestRepairs.request(missing(runId, digest('1')));
    expect(stale).toMatchObject({ created: false, repair: { id: first.repair.id, state: 'done' } });
    const { rows } = await t.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM manifest_repairs WHERE run_id = $1',
      [runId],
    );
    expect(rows[0]?.n).toBe(1);

    // The manifest now in force going missing is a new problem: a new request.
    const again = await t.vault.manifestRepairs.request(missing(runId, digest('2')));
    expect(again.created).toBe(true);
    expect(again.repair.id).not.toBe(first.repair.id);
  });
});

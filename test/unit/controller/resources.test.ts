/**
 * ATTESTATION_RESOURCES and ATTESTATION_RESOURCE_RETENTION: the pure decisions (resources.ts), the
 * reconciler acting on them against in-memory seams, and the configuration refusing bad values.
 * The same behaviour against kube-apiserver, PostgreSQL and MinIO: test/integration/operator/resources.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.ts';
import type { Run } from '../../../src/crd/run.ts';
import { reconcileRun, type RunReconcilerDeps } from '../../../src/controller/run/reconciler.ts';
import { projectRun } from '../../../src/controller/transparency/projection.ts';
import {
  recordCounts,
  resourceRecords,
  untilPrune,
  wantedResources,
  withResources,
  type ResourcePolicy,
} from '../../../src/controller/run/resources.ts';
import type { ArtifactRecord, AttestationSummary } from '../../../src/vault/index.ts';
import { configProblems, controllerEnv } from '../config/load.ts';
import {
  logger,
  reconcilerDeps,
  resetCounts,
  runFixture,
  stepsDone,
  storedRun,
  succeeded,
  world,
  writes,
  type World,
} from './fixtures.ts';

const HOUR = 3_600_000;

const summary = (id: string, kind: AttestationSummary['kind']): AttestationSummary => ({
  id,
  kind,
  predicateType: 'https://example.test/p',
  subjects: ['run:x'],
  digest: `sha256:${'0'.repeat(64)}`,
});

describe('resources.ts (pure)', () => {
  const ended = runFixture(stepsDone(3), succeeded);
  const running = runFixture(stepsDone(1));
  const aibom = { createdAt: new Date('2026-03-01T10:00:00Z') } as ArtifactRecord;
  const keep: ResourcePolicy = { mode: 'perRun' };
  const oneHour: ResourcePolicy = { mode: 'perRecord', retentionMs: HOUR };

  it('prunes only an ended Run with an AIBOM, once its retention has passed since the AIBOM', () => {
    expect(wantedResources(ended, aibom, keep, new Date('2030-01-01'))).toBe('perRun');
    expect(wantedResources(ended, aibom, oneHour, new Date('2026-03-01T10:59:59Z'))).toBe('perRecord');
    expect(wantedResources(ended, aibom, oneHour, new Date('2026-03-01T11:00:00Z'))).toBe('pruned');
    expect(wantedResources(ended, null, oneHour, new Date('2030-01-01'))).toBe('perRecord');
    expect(wantedResources(running, aibom, oneHour, new Date('2030-01-01'))).toBe('perRecord');
    expect(untilPrune(ended, aibom, oneHour, new Date('2026-03-01T10:30:00Z'))).toBe(HOUR / 2);
    expect(untilPrune(ended, aibom, oneHour, new Date('2026-03-01T11:00:00Z'))).toBeUndefined();
    expect(untilPrune(ended, aibom, keep, new Date('2026-03-01T10:30:00Z'))).toBeUndefined();
    // Beyond what a timer can wait: looked at again within a day.
    const year = { mode: 'perRecord', retentionMs: 365 * 24 * HOUR } as const;
    expect(untilPrune(ended, aibom, year, new Date('2026-03-01T10:00:00Z'))).toBe(24 * HOUR);
  });

  it('perRecord keeps every record, perRun the provenance record only, none and pruned nothing', () => {
    const records = [summary('a', 'step'), summary('b', 'run'), summary('c', 'aibom')];
    expect(resourceRecords('perRecord', records).map((r) => r.id)).toEqual(['a', 'b', 'c']);
    expect(resourceRecords('perRun', records).map((r) => r.id)).toEqual(['b']);
    expect(resourceRecords('perRun', records.slice(0, 1))).toEqual([]);
    expect(resourceRecords('none', records)).toEqual([]);
    expect(resourceRecords('pruned', records)).toEqual([]);
    expect(recordCounts(records)).toEqual({
      count: 3,
      kinds: { step: 1, run: 1, aibom: 1 },
      aibomAttestationId: 'c',
    });
  });

  it('a perRecord status reads as before the setting; any other state says where the evidence is', () => {
    const status = { attestations: { count: 3 } };
    expect(withResources(status, ended, 'perRecord')).toBe(status);
    expect(withResources(status, ended, 'none').attestations).toEqual({
      count: 3,
      resources: 'none',
      evidence: `POST /v1/attestations/query {"run_id":"${ended.metadata.uid}"}`,
    });
  });
});

/** Reconciles `run` until it asks for nothing more, with `policy` and the clock at `now`. */
async function settle(w: World, run: Run, policy: ResourcePolicy, now = new Date()) {
  const deps: RunReconcilerDeps = { ...reconcilerDeps(w), resources: policy, now: () => now };
  let out;
  for (let i = 0; i < 20; i++) {
    out = await reconcileRun(deps, run.metadata.namespace, run.metadata.name);
    if (out?.more !== true) return out;
  }
  throw new Error('the reconciler never settled');
}

const resourceIds = (w: World): string[] => [...w.kube.attestations.keys()].sort();

describe('Run reconciler with ATTESTATION_RESOURCES (in-memory seams)', () => {
  it('perRun: one resource, the provenance record, counting every record; a second reconcile is free', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(3), succeeded));
    await settle(w, run, { mode: 'perRun' });
    const ids = w.vault.rows.map((r) => r.id);
    expect(ids.length).toBeGreaterThan(5);
    const provenance = w.vault.rows.find((r) => r.kind === 'run')!.id;
    expect(resourceIds(w)).toEqual([provenance]);
    expect(w.kube.attestations.get(provenance)!.status.records).toMatchObject({ count: ids.length });
    const now = storedRun(w, run);
    expect(now.status?.attestations).toMatchObject({
      count: ids.length,
      resources: 'perRun',
      evidence: `POST /v1/attestations/query {"run_id":"${run.metadata.uid}"}`,
    });
    resetCounts(w);
    await settle(w, storedRun(w, run), { mode: 'perRun' });
    expect(writes(w)).toEqual({});
    expect(w.kube.requests.total()).toBe(0);
  });

  it("perRun with transparency: the one resource shows the Run's state, not its record's", async () => {
    const w = await world({ transparency: true });
    const run = w.kube.put(runFixture(stepsDone(3), succeeded));
    await settle(w, run, { mode: 'perRun' });
    const id = w.vault.rows.find((r) => r.kind === 'run')!.id;
    const project = () =>
      projectRun({ api: w.kube.projectionApi(), jobs: w.vault.transparencyJobs, logger }, run.metadata.uid);
    await project();
    const one = () => w.kube.attestations.get(id)!.status;
    expect(one().transparency).toEqual({ state: 'queued' });
    // The provenance record alone published: the Run (and so its one resource) still waits.
    w.vault.publish(id, {
      state: 'published',
      attempts: 1,
      backend: 'local',
      entryId: 'e0'.padEnd(64, '0'),
      logIndex: 0,
      receipt: Buffer.from('receipt'),
      statement: Buffer.from('statement'),
      publishedAt: new Date('2026-03-01T12:00:00Z'),
    });
    await project();
    // As the Run's own summary says it: queued, its published part in this deployment's own log.
    expect(one().transparency).toEqual({ state: 'queued', mode: 'dry_run' });
    expect(storedRun(w, run).status?.transparency).toMatchObject({ state: 'queued', mode: 'dry_run' });
    w.vault.rows.forEach((r, i) => {
      if (r.id === id) return;
      w.vault.publish(r.id, {
        state: 'published',
        attempts: 1,
        backend: 'local',
        entryId: `e${i + 1}`.padEnd(64, '0'),
        logIndex: i + 1,
        receipt: Buffer.from('receipt'),
        statement: Buffer.from('statement'),
        publishedAt: new Date('2026-03-01T12:00:00Z'),
      });
    });
    await project();
    expect(one().transparency).toEqual({ state: 'published', mode: 'dry_run' });
    expect(one().records).toMatchObject({ count: w.vault.rows.length });
  });

  it('none: no resource at all, the status carries count and evidence', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(3), succeeded));
    await settle(w, run, { mode: 'none' });
    expect(w.kube.attestations.size).toBe(0);
    expect(storedRun(w, run).status?.attestations).toMatchObject({
      count: w.vault.rows.length,
      resources: 'none',
    });
  });

  it('switching perRecord → perRun → none → perRecord converges the resources and never touches a record', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(3), succeeded));
    await settle(w, run, { mode: 'perRecord' });
    const all = w.vault.rows.map((r) => r.id).sort();
    expect(resourceIds(w)).toEqual(all);
    expect(storedRun(w, run).status?.attestations?.resources).toBeUndefined();
    await settle(w, storedRun(w, run), { mode: 'perRun' });
    expect(resourceIds(w)).toEqual([w.vault.rows.find((r) => r.kind === 'run')!.id]);
    await settle(w, storedRun(w, run), { mode: 'none' });
    expect(resourceIds(w)).toEqual([]);
    resetCounts(w);
    await settle(w, storedRun(w, run), { mode: 'perRecord' });
    expect(resourceIds(w)).toEqual(all);
    expect(storedRun(w, run).status?.attestations?.resources).toBeUndefined();
    // Only resources and the status moved: the vault was not written.
    expect(Object.keys(writes(w)).filter((k) => k.startsWith('vault') || k.startsWith('blob'))).toEqual([]);
    expect(w.vault.rows.map((r) => r.id).sort()).toEqual(all);
  });

  it('retention: asks to be looked at again when due, then deletes every resource; the records stay', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(3), succeeded));
    const policy: ResourcePolicy = { mode: 'perRecord', retentionMs: HOUR };
    const out = await settle(w, run, policy);
    expect(out?.requeueAfterMs).toBeGreaterThan(HOUR - 60_000);
    expect(out?.requeueAfterMs).toBeLessThanOrEqual(HOUR + 60_000);
    const records = w.vault.rows.length;
    expect(w.kube.attestations.size).toBe(records);
    expect(await settle(w, storedRun(w, run), policy, new Date(Date.now() + 2 * HOUR))).toBeUndefined();
    expect(w.kube.attestations.size).toBe(0);
    expect(w.vault.rows).toHaveLength(records);
    expect(storedRun(w, run).status?.attestations).toMatchObject({ count: records, resources: 'pruned' });
    // Pruned for good, whatever the mode is later.
    await settle(
      w,
      storedRun(w, run),
      { mode: 'perRun', retentionMs: HOUR },
      new Date(Date.now() + 3 * HOUR),
    );
    expect(w.kube.attestations.size).toBe(0);
  });
});

describe('configuration', () => {
  it('defaults to perRecord, kept; parses the modes and durations', () => {
    const c = loadConfig('controller', controllerEnv);
    expect(c.ATTESTATION_RESOURCES).toBe('perRecord');
    expect(c.ATTESTATION_RESOURCE_RETENTION).toBeUndefined();
    const d = loadConfig('controller', {
      ...controllerEnv,
      ATTESTATION_RESOURCES: 'perRun',
      ATTESTATION_RESOURCE_RETENTION: '30d',
    });
    expect(d.ATTESTATION_RESOURCES).toBe('perRun');
    expect(d.ATTESTATION_RESOURCE_RETENTION).toBe(30 * 24 * HOUR);
    expect(
      loadConfig('controller', { ...controllerEnv, ATTESTATION_RESOURCE_RETENTION: '90s' })
        .ATTESTATION_RESOURCE_RETENTION,
    ).toBe(90_000);
  });

  it('refuses bad values with the key and what it accepts', () => {
    expect(configProblems({ ATTESTATION_RESOURCES: 'perrun' })).toContain(
      'ATTESTATION_RESOURCES: must be one of perRecord, perRun, none, got "perrun"',
    );
    for (const bad of ['0', '-1d', '1w', '1.5h', '30', 'forever', '3651d']) {
      expect(configProblems({ ATTESTATION_RESOURCE_RETENTION: bad }), bad).toMatch(
        /^invalid configuration:\n {2}ATTESTATION_RESOURCE_RETENTION: must be/,
      );
    }
  });
});

/**
 * The transparency projection against in-memory seams: job state (FakeVault) → Attestation
 * resources' and the Run's `status.transparency` (FakeKube, its own field manager).
 */
import { describe, expect, it } from 'vitest';
import type { Run } from '../../../src/crd/run.ts';
import { reconcileRun } from '../../../src/controller/run/reconciler.ts';
import {
  mayNeedProjection,
  projectionTargetsChanged,
  projectRun,
  type ProjectionDeps,
} from '../../../src/controller/transparency/projection.ts';
import { summaryOfCounts } from '../../../src/transparency/summary.ts';
import {
  logger,
  resetCounts,
  runFixture,
  stepsDone,
  succeeded,
  world,
  writes,
  type World,
} from './fixtures.ts';

const projection = (w: World): ProjectionDeps => ({
  api: w.kube.projectionApi(),
  jobs: w.vault.transparencyJobs,
  logger,
});

async function recorded(w: World, ...mods: ((r: Run) => void)[]): Promise<Run> {
  const run = w.kube.put(runFixture(...mods));
  await reconcileRun(
    { api: w.kube.runApi(), vault: w.vault, recorder: w.recorder, logger },
    run.metadata.namespace,
    run.metadata.name,
  );
  return w.kube.run(run.metadata.namespace, run.metadata.name)!;
}

const published = (
  w: World,
  attestationId: string,
  index: number,
  backend: 'local' | 'scrapi' = 'local',
): void =>
  w.vault.publish(attestationId, {
    state: 'published',
    attempts: 1,
    backend,
    entryId: `e${index}`.padEnd(64, '0'),
    logIndex: index,
    receipt: Buffer.from('receipt'),
    statement: Buffer.from('statement'),
    publishedAt: new Date('2026-03-01T12:00:00Z'),
  });

describe('transparency projection (in-memory seams)', () => {
  it('shows queued jobs on every Attestation and the Run, then makes no write when nothing changed', async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, succeeded);
    const count = run.status!.attestations!.count!;
    resetCounts(w);
    await projectRun(projection(w), run.metadata.uid);
    expect(w.kube.requests.calls.get('PATCH attestations/status')).toBe(count);
    const now = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    expect(now.status?.transparency).toEqual({
      state: 'queued',
      queued: count,
      published: 0,
      retrying: 0,
      notQueued: 0,
    });
    expect(now.status?.conditions?.find((c) => c.type === 'TransparencyPublished')).toMatchObject({
      status: 'False',
      reason: 'PublicationQueued',
    });
    const aibom = now.status?.artifacts?.aibom as { digest: string; transparency: { status: string } };
    // The entry joins the record the reconciler wrote (its own fields untouched).
    expect(aibom.digest).toMatch(/^sha256:/);
    expect(aibom.transparency).toMatchObject({ status: 'queued', attempts: 0 });
    for (const a of w.kube.attestations.values()) {
      expect(a.status.transparency).toMatchObject({ state: 'queued', attempts: 0 });
    }

    resetCounts(w);
    await projectRun(projection(w), run.metadata.uid);
    expect(writes(w)).toEqual({});
  });

  it('writes only what moved, and announces the Run published once', async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, succeeded);
    await projectRun(projection(w), run.metadata.uid);
    const ids = w.vault.rows.map((r) => r.id);
    published(w, ids[0]!, 0);
    resetCounts(w);
    await projectRun(projection(w), run.metadata.uid);
    expect(w.kube.requests.calls.get('PATCH attestations/status')).toBe(1);
    expect(w.kube.attestations.get(ids[0]!)!.status.transparency).toEqual({
      state: 'published',
      jobId: w.vault.jobs.get(ids[0]!)!.id,
      attempts: 1,
      entryId: 'e0'.padEnd(64, '0'),
      // No logIndex: the tenant reads this resource (issue 28: the shared log's positions).
      backend: 'local',
      mode: 'dry_run',
    });
    for (const [k, id] of ids.entries()) if (k > 0) published(w, id, k);
    await projectRun(projection(w), run.metadata.uid);
    await projectRun(projection(w), run.metadata.uid);
    const now = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    expect(now.status?.transparency).toMatchObject({ state: 'published', published: ids.length, queued: 0 });
    expect((now.status?.artifacts?.aibom as { transparency: unknown }).transparency).toMatchObject({
      status: 'published',
      mode: 'dry_run',
      receipt: Buffer.from('receipt').toString('base64'),
    });
    const announced = w.kube.events.filter((e) => e.reason === 'TransparencyPublished');
    expect(announced).toHaveLength(1);
    // Honest states (issue 10 item 5): this deployment's own log is a dry run, never "anchored".
    expect(now.status?.transparency?.mode).toBe('dry_run');
    expect(announced[0]!.note).toMatch(/own transparency log \(dry run/);
    expect(announced[0]!.note).not.toMatch(/anchored/);
  });

  it('a remote SCITT service is `published` and announced as anchored; some of each is `mixed`', async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, succeeded);
    const ids = w.vault.rows.map((r) => r.id);
    for (const [k, id] of ids.entries()) published(w, id, k, 'scrapi');
    await projectRun(projection(w), run.metadata.uid);
    const now = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    expect(now.status?.transparency).toMatchObject({ state: 'published', mode: 'published' });
    expect(w.kube.attestations.get(ids[0]!)!.status.transparency).toMatchObject({ mode: 'published' });
    const [event] = w.kube.events.filter((e) => e.reason === 'TransparencyPublished');
    expect(event!.note).toMatch(/anchored in the remote SCITT/);

    const w2 = await world({ transparency: true });
    const run2 = await recorded(w2, succeeded);
    const ids2 = w2.vault.rows.map((r) => r.id);
    for (const [k, id] of ids2.entries()) published(w2, id, k, k === 0 ? 'local' : 'scrapi');
    await projectRun(projection(w2), run2.metadata.uid);
    const mixed = w2.kube.run(run2.metadata.namespace, run2.metadata.name)!;
    expect(mixed.status?.transparency?.mode).toBe('mixed');
    expect(w2.kube.events.find((e) => e.reason === 'TransparencyPublished')!.note).toMatch(
      /1 only in this deployment's own log \(dry run\)/,
    );
  });

  it("brings the bucket's aibom.meta.json up to date before the Run shows a new AIBOM entry", async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, succeeded);
    const refreshed: { runId: string; status: string; mode?: string }[] = [];
    const deps: ProjectionDeps = {
      ...projection(w),
      refreshAibomMetadata: (runId, entry) => {
        refreshed.push({ runId, status: entry.status, ...(entry.mode ? { mode: entry.mode } : {}) });
        return Promise.resolve();
      },
    };
    await projectRun(deps, run.metadata.uid);
    expect(refreshed).toEqual([{ runId: run.metadata.uid, status: 'queued' }]);
    await projectRun(deps, run.metadata.uid);
    expect(refreshed).toHaveLength(1);
    for (const [k, id] of w.vault.rows.map((r) => r.id).entries()) published(w, id, k);
    await projectRun(deps, run.metadata.uid);
    expect(refreshed.at(-1)).toEqual({ runId: run.metadata.uid, status: 'published', mode: 'dry_run' });
    // A failure to write the copy fails the projection (retried) before the Run shows the entry.
    const w3 = await world({ transparency: true });
    const run3 = await recorded(w3, succeeded);
    await expect(
      projectRun(
        { ...projection(w3), refreshAibomMetadata: () => Promise.reject(new Error('store down')) },
        run3.metadata.uid,
      ),
    ).rejects.toThrow('store down');
    expect(w3.kube.run(run3.metadata.namespace, run3.metadata.name)!.status?.transparency).toBeUndefined();
  });

  it('a job that keeps failing keeps the Run queued; the condition and its Attestation say why', async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, stepsDone(1));
    const id = w.vault.rows[0]!.id;
    const next = new Date(Date.now() + 600_000);
    w.vault.publish(id, { attempts: 10, lastError: 'REMOTE_UNAVAILABLE: 503', nextAttemptAt: next });
    await projectRun(projection(w), run.metadata.uid);
    const now = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    expect(now.status?.transparency).toMatchObject({ state: 'queued', retrying: 1 });
    expect(now.status?.transparency).not.toHaveProperty('failed');
    expect(w.kube.attestations.get(id)!.status.transparency).toMatchObject({
      state: 'queued',
      attempts: 10,
      lastError: 'REMOTE_UNAVAILABLE: 503',
      nextAttemptAt: next.toISOString(),
    });
    const condition = now.status?.conditions?.find((c) => c.type === 'TransparencyPublished');
    expect(condition).toMatchObject({ status: 'False', reason: 'PublicationRetrying' });
    expect(condition?.message).toContain('attempt 10: REMOTE_UNAVAILABLE: 503');
    expect(condition?.message).toContain(`next attempt at ${next.toISOString()}`);
    // No AIBOM yet: no `artifacts.aibom` appears with only a transparency entry in it.
    expect(now.status?.artifacts).toBeUndefined();
  });

  it('records without jobs (made before the writer was on) project to nothing', async () => {
    const w = await world({ transparency: false });
    const run = await recorded(w, succeeded);
    resetCounts(w);
    await projectRun(projection(w), run.metadata.uid);
    expect(writes(w)).toEqual({});
    expect(w.kube.run(run.metadata.namespace, run.metadata.name)!.status?.transparency).toBeUndefined();
  });

  it('a run whose records only partly have jobs is never `published` (one of its records pushed)', async () => {
    // Records stored with the writer off, then one of them given a job and published.
    const w = await world({ transparency: true });
    const run = await recorded(w, succeeded);
    const ids = w.vault.rows.map((r) => r.id);
    expect(ids.length).toBeGreaterThan(1);
    for (const id of ids.slice(1)) w.vault.jobs.delete(id);
    published(w, ids[0]!, 0);
    await projectRun(projection(w), run.metadata.uid);
    const now = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    expect(now.status?.transparency).toEqual({
      state: 'queued',
      mode: 'dry_run',
      queued: 0,
      published: 1,
      retrying: 0,
      notQueued: ids.length - 1,
    });
    expect(now.status?.conditions?.find((c) => c.type === 'TransparencyPublished')).toMatchObject({
      status: 'False',
      reason: 'RecordsNotQueued',
    });
    expect(w.kube.events.filter((e) => e.reason === 'TransparencyPublished')).toEqual([]);
    // The runs list computes the same from its SQL counts and the run's record count.
    const counts = { queued: 0, published: 1, retrying: 0, publishedLocal: 1, publishedRemote: 0 };
    expect(summaryOfCounts({ ...counts, records: 10 })).toMatchObject({ state: 'queued', notQueued: 9 });
    expect(summaryOfCounts({ ...counts, queued: 9, records: 10 })).toMatchObject({
      state: 'queued',
      notQueued: 0,
    });
    expect(summaryOfCounts({ ...counts, records: 1 }).state).toBe('published');
  });

  it('an Attestation resource not created yet is projected once the reconciler created it', async () => {
    const w = await world({ transparency: true });
    const run = await recorded(w, stepsDone(1));
    const [first] = w.vault.rows;
    w.kube.attestations.delete(first!.id);
    await projectRun(projection(w), run.metadata.uid);
    // The reconciler creates it (and moves the Run's count): the Run update re-triggers the projection.
    const before = w.kube.run(run.metadata.namespace, run.metadata.name)!;
    await w.kube.runApi().createAttestation(before, first!);
    await projectRun(projection(w), run.metadata.uid);
    expect(w.kube.attestations.get(first!.id)!.status.transparency).toMatchObject({ state: 'queued' });
  });

  it('chooses the Runs to project after a reconnect, and the Run updates that add targets', () => {
    const base = runFixture(succeeded, (r) => (r.status!.attestations = { count: 3 }));
    expect(mayNeedProjection(runFixture())).toBe(false);
    expect(mayNeedProjection(base)).toBe(true);
    const done = runFixture(succeeded, (r) => {
      r.status!.attestations = { count: 3 };
      r.status!.transparency = { state: 'published', mode: 'dry_run', published: 3, queued: 0, notQueued: 0 };
      r.status!.conditions = [
        {
          type: 'TransparencyPublished',
          status: 'True',
          reason: 'Published',
          message: '3 of 3 record(s) in a transparency log',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ];
    });
    expect(mayNeedProjection(done)).toBe(false);
    const more = structuredClone(done);
    more.status!.attestations = { count: 4 };
    expect(mayNeedProjection(more)).toBe(true);
    expect(projectionTargetsChanged(done, more)).toBe(true);
    expect(projectionTargetsChanged(done, structuredClone(done))).toBe(false);
    const withAibom = structuredClone(done);
    withAibom.status!.artifacts = { aibom: { digest: 'sha256:x' } };
    expect(projectionTargetsChanged(done, withAibom)).toBe(true);
    expect(mayNeedProjection(withAibom)).toBe(true);
  });
});

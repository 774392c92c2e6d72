/**
 * The Run reconciler against in-memory seams (FakeKube's RunApi, FakeVault's repositories, an
 * in-memory object store) with the real recorder and real keys: the fast loop for the common
 * change. The same behaviour runs against kube-apiserver, PostgreSQL and MinIO in
 * test/integration/operator/.
 */
import { describe, expect, it } from 'vitest';
import { ConditionTypes, FINALIZER, Reasons } from '../../../src/crd/reasons.ts';
import type { Run } from '../../../src/crd/run.ts';
import { jcsSha256Hex, verifyRecord } from '../../../src/attest/index.ts';
import { verifyManifest } from '../../../src/c2pa/index.ts';
import { isOwnEcho, runView } from '../../../src/controller/run/plan.ts';
import { OwnWrites } from '../../../src/controller/run/own-writes.ts';
import { reconcileRun, type RunReconcilerDeps } from '../../../src/controller/run/reconciler.ts';
import { aibomKey, stepKey, terminalKey, type AibomMetadata } from '../../../src/recorder/index.ts';
import {
  failedAt,
  resetCounts,
  runFixture,
  stepsDone,
  succeeded,
  world,
  writes,
  conditionOf,
  reconcileIn,
  reconcilerDeps,
  storedRun,
} from './fixtures.ts';

/** The same JSON with every object's keys in reverse order (what a server may hand back). */
function reordered<T>(v: T): T {
  if (Array.isArray(v)) return v.map(reordered) as T;
  if (typeof v !== 'object' || v === null) return v;
  return Object.fromEntries(
    Object.entries(v)
      .reverse()
      .map(([k, x]) => [k, reordered(x)]),
  ) as T;
}

describe('Run reconciler (in-memory seams)', () => {
  it('a new Run gets the finalizer, its mirror and a waiting status; nothing is recorded', async () => {
    const w = await world();
    const run = w.kube.put(runFixture());
    await reconcileIn(w, run);
    const now = storedRun(w, run);
    expect(now.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.vault.mirrors.get(run.metadata.uid)?.spec).toEqual(run.spec);
    expect(conditionOf(now, ConditionTypes.Attested)).toMatchObject({
      status: 'False',
      reason: Reasons.WaitingForSteps,
      observedGeneration: 1,
    });
    expect(conditionOf(now, ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'False',
      reason: Reasons.RunNotTerminal,
    });
    expect(now.status?.attestations).toEqual({ count: 0 });
    expect(w.vault.rows).toHaveLength(0);
    // Decided from the cache: no live read for a Run that is not terminal.
    expect(w.kube.requests.calls.get('GET run')).toBeUndefined();
  });

  it('records each finished step once and creates its Attestation resources', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(2)));
    await reconcileIn(w, run);
    const id = run.metadata.uid;
    // retrieve: 1 capability + 1 step + its output artifact; summarise: 1 step + its output artifact.
    expect(w.vault.claimed.get(stepKey(id, 'retrieve'))).toHaveLength(3);
    expect(w.vault.claimed.get(stepKey(id, 'summarise'))).toHaveLength(2);
    expect(w.vault.claimed.has(stepKey(id, 'post'))).toBe(false);
    expect(w.vault.claimed.has(terminalKey(id))).toBe(false);
    expect(w.kube.attestations.size).toBe(5);
    // One Event for everything one reconcile recorded.
    expect(w.kube.events.filter((e) => e.reason === 'Attested').map((e) => e.note)).toEqual([
      'recorded 3 attestation(s) for step retrieve, 2 attestation(s) for step summarise',
    ]);
    const now = storedRun(w, run);
    expect(now.status?.attestations).toEqual({ count: 5 });
    expect(w.vault.rows.filter((r) => r.kind === 'artifact').map((r) => r.record.subjects)).toEqual([
      [`artifact:${id}:steps/retrieve/output`],
      [`artifact:${id}:steps/summarise/output`],
    ]);
    expect(conditionOf(now, ConditionTypes.Attested)).toMatchObject({
      status: 'True',
      reason: Reasons.StepsAttested,
    });
    // Each record is signed by the namespace's signer and its digest is the envelope's.
    for (const row of w.vault.rows) {
      expect(verifyRecord(row.record, { publicKeys: [w.signer.publicKey] }).ok, row.kind).toBe(true);
    }
    // The step record carries the pack that governs it (the step's own).
    const summarise = w.vault.rows.find((r) => r.kind === 'step' && r.record.stepId === 'summarise')!;
    expect(summarise.record).toMatchObject({ policyPack: 'strict', policyVersion: '2' });
  });

  it('a second reconcile of a converged Run makes no write and no request', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
    expect(w.kube.requests.total()).toBe(0);
  });

  it('the event of its own status write is not reconciled again; any other change is', async () => {
    const w = await world();
    const written = new OwnWrites();
    const withMemory: RunReconcilerDeps = { ...reconcilerDeps(w), written };
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileRun(withMemory, 'team-a', 'r1');
    expect(written.size).toBe(1);
    // The echo: the Run as the reconcile left it. A vault read would fail: none is made.
    w.vault.failNext = new Error('the vault must not be read');
    resetCounts(w);
    await reconcileRun(withMemory, 'team-a', 'r1');
    expect(w.kube.requests.total()).toBe(0);
    expect(w.vault.failNext).toBeDefined();
    w.vault.failNext = undefined;
    // A pipeline write the reconciler has not seen: reconciled in full (the next step recorded).
    await reconcileRun(withMemory, 'team-a', 'r1');
    const next = runFixture(stepsDone(2));
    next.metadata.uid = run.metadata.uid;
    w.kube.put(next);
    await reconcileRun(withMemory, 'team-a', 'r1');
    expect(w.vault.claimed.has(stepKey(run.metadata.uid, 'summarise'))).toBe(true);
    // Someone else changes a field the reconciler owns: not its echo, repaired.
    const stored = w.kube.run('team-a', 'r1')!;
    const status = stored.status!;
    const echo = { view: runView(stored), status };
    const tampered = { ...stored, status: { ...status, attestations: { count: 0 } } };
    expect(isOwnEcho(tampered, echo)).toBe(false);
    expect(isOwnEcho(stored, echo)).toBe(true);
  });

  it('a Run forced while its status write was remembered (a repair asked for) is reconciled in full', async () => {
    const w = await world();
    const written = new OwnWrites();
    const withMemory: RunReconcilerDeps = { ...reconcilerDeps(w), written };
    w.kube.put(runFixture(stepsDone(1)));
    await reconcileRun(withMemory, 'team-a', 'r1');
    expect(written.size).toBe(1);
    written.force('team-a/r1');
    w.vault.failNext = new Error('the forced reconcile reads the vault');
    await expect(reconcileRun(withMemory, 'team-a', 'r1')).rejects.toThrow(
      /the forced reconcile reads the vault/,
    );
  });

  it('a terminal Run: policies and provenance, then the AIBOM, from the cache; then it converges', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    // The finalizer is on from an earlier reconcile: count what the terminal phase costs.
    await w.kube.runApi().addFinalizer(run);
    resetCounts(w);
    await reconcileIn(w, run);
    const id = run.metadata.uid;
    // A resource per record, one Event, one status write; no read (ADR 0017).
    const records = w.vault.rows.length;
    expect(Object.fromEntries(w.kube.requests.calls)).toEqual({
      'POST attestations': records,
      'POST events': 1,
      'PATCH runs/status': 1,
    });
    // 2 policy records (baseline@1.2.0 and strict@2) + the run's provenance.
    const terminal = w.vault.claimed.get(terminalKey(id))!;
    expect(terminal).toHaveLength(3);
    expect(w.vault.rows.filter((r) => r.kind === 'policy').map((r) => r.record.policyPack)).toEqual([
      'baseline',
      'strict',
    ]);
    // The AIBOM record, its two standard views (CycloneDX 1.7, SPDX 3.0.1) and the AIBOM blob's
    // artifact record, in one batch.
    expect(w.vault.claimed.get(aibomKey(id))).toHaveLength(4);

    const now = storedRun(w, run);
    const meta = now.status?.artifacts?.aibom as AibomMetadata;
    expect(conditionOf(now, ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'True',
      reason: Reasons.AIBOMRecorded,
    });
    expect(conditionOf(now, ConditionTypes.Attested)).toMatchObject({
      status: 'True',
      reason: Reasons.RunAttested,
    });
    // The AIBOM lists every record made before it (its two views and its blob's artifact record come
    // after it), and its C2PA manifest binds the stored bytes.
    const at = w.vault.rows.findIndex((r) => r.kind === 'aibom');
    const before = w.vault.rows.slice(0, at).map((r) => r.id);
    expect(meta.attestation_ids).toEqual(before);
    expect(w.vault.rows.slice(at).map((r) => r.kind)).toEqual(['aibom', 'artifact', 'artifact', 'artifact']);
    expect(now.status?.attestations).toMatchObject({
      count: before.length + 4,
      runAttestationId: w.vault.rows.find((r) => r.kind === 'run')!.id,
      aibomAttestationId: meta.aibom_attestation_id,
    });
    const bytes = w.blobs.objects.get(meta.key)!.body;
    const manifest = w.blobs.objects.get(meta.c2pa_manifest.key)!.body;
    expect(verifyManifest({ store: manifest, asset: bytes, trustAnchors: w.pki['ca.crt'] }).ok).toBe(true);
    expect(JSON.parse(w.blobs.objects.get(meta.key.replace(/json$/, 'meta.json'))!.body.toString())).toEqual(
      meta,
    );
    expect(w.kube.attestations.size).toBe(before.length + 4);
    expect(w.kube.events).toEqual([
      {
        type: 'Normal',
        reason: 'AIBOMRecorded',
        note:
          'recorded 3 attestation(s) for step retrieve, 2 attestation(s) for step summarise, ' +
          `2 attestation(s) for step post, 3 attestation(s) for run and policies; AIBOM ${meta.digest} stored at ${meta.key}`,
      },
    ]);

    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
    expect(w.kube.requests.total()).toBe(0);
  });

  it('compares status structurally: the same status with keys in another order is not rewritten', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    await reconcileIn(w, run);
    const current = w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!;
    current.status = reordered(current.status!);
    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
  });

  it('leaves the fields the transparency projection owns alone', async () => {
    const w = await world({ transparency: true });
    const run = w.kube.put(runFixture(succeeded));
    await reconcileIn(w, run);
    const projected = {
      transparency: { state: 'queued', queued: 7, published: 0, failed: 0 },
      artifacts: { aibom: { transparency: { job_id: 'j', status: 'queued', attempts: 0 } } },
    } as const;
    await w.kube.projectionApi().applyRunTransparency(storedRun(w, run), projected);
    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
    const now = storedRun(w, run);
    expect(now.status?.transparency).toEqual(projected.transparency);
    expect((now.status?.artifacts?.aibom as { transparency?: unknown }).transparency).toEqual(
      projected.artifacts.aibom.transparency,
    );
  });

  it('records a Failed run: the failed step, the run, the AIBOM with status failed', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(failedAt('summarise')));
    await reconcileIn(w, run);
    const meta = storedRun(w, run).status?.artifacts?.aibom as AibomMetadata;
    expect(meta.status).toBe('failed');
    const step = w.vault.rows.find((r) => r.kind === 'step' && r.record.stepId === 'summarise')!;
    const statement = JSON.parse(Buffer.from(step.record.envelope.payload, 'base64').toString()) as {
      predicate: { phase: string; outputDigest: unknown };
    };
    expect(statement.predicate).toMatchObject({
      phase: 'failed',
      outputDigest: { sha256: jcsSha256Hex({ error: 'boom' }) },
    });
  });

  it('a vault outage: VaultUnavailable on the condition, a Warning, a retry; then it converges', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    w.vault.failNext = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    await expect(reconcileIn(w, run)).rejects.toThrow('ECONNREFUSED');
    expect(conditionOf(storedRun(w, run), ConditionTypes.Attested)).toMatchObject({
      status: 'False',
      reason: Reasons.VaultUnavailable,
      message: 'the vault (PostgreSQL) is unavailable: connect ECONNREFUSED 127.0.0.1:5432',
    });
    expect(w.kube.events.at(-1)).toMatchObject({ type: 'Warning', reason: Reasons.VaultUnavailable });
    await reconcileIn(w, run);
    expect(conditionOf(storedRun(w, run), ConditionTypes.Attested)).toMatchObject({ status: 'True' });
    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
  });

  it('an object store outage during the AIBOM: ObjectStoreUnavailable, then repaired', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    // The first put is the AIBOM blob.
    w.blobs.failNext = new Error('S3 503 SlowDown');
    await expect(reconcileIn(w, run)).rejects.toThrow('SlowDown');
    expect(conditionOf(storedRun(w, run), ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'False',
      reason: Reasons.ObjectStoreUnavailable,
    });
    await reconcileIn(w, run);
    expect(conditionOf(storedRun(w, run), ConditionTypes.AIBOMReady)).toMatchObject({ status: 'True' });
    expect(w.vault.rows.filter((r) => r.kind === 'aibom')).toHaveLength(1);
  });

  it('a manifest repair: shown while it runs, a failed attempt stays open with a backoff, then a new manifest over the same bytes', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    await reconcileIn(w, run);
    const before = storedRun(w, run).status!.artifacts!.aibom as AibomMetadata;
    w.blobs.objects.delete(before.c2pa_manifest.key);
    const repair = w.vault.requestRepair(run.metadata.uid, 'missing');

    // The attempt fails on the object store: the Run says so; the request stays open, due later.
    w.blobs.failNext = new Error('S3 503 SlowDown');
    await expect(reconcileIn(w, run)).rejects.toThrow('SlowDown');
    expect(conditionOf(storedRun(w, run), ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'False',
      reason: Reasons.ObjectStoreUnavailable,
    });
    const open = w.vault.artifactRows.get(`${run.metadata.uid}/aibom`)!.repairs[0]!;
    expect(open).toMatchObject({ id: repair.id, state: 'queued', attempts: 1 });
    expect(open.nextAttemptAt.getTime()).toBeGreaterThan(Date.now());

    await reconcileIn(w, run);
    const after = storedRun(w, run);
    const ready = conditionOf(after, ConditionTypes.AIBOMReady)!;
    expect(ready).toMatchObject({ status: 'True', reason: Reasons.AIBOMRecorded });
    expect(ready.message).toMatch(/re-signed over the same bytes .* found missing/);
    const shown = after.status!.artifacts!.aibom as AibomMetadata & {
      c2pa_manifest_history: { digest: string }[];
    };
    expect(shown.c2pa_manifest.digest).not.toBe(before.c2pa_manifest.digest);
    expect(shown.c2pa_manifest_history.map((h) => h.digest)).toEqual([before.c2pa_manifest.digest]);
    const bytes = w.blobs.objects.get(before.key)!.body;
    const manifest = w.blobs.objects.get(shown.c2pa_manifest.key)!.body;
    const verified = verifyManifest({ store: manifest, asset: bytes, trustAnchors: w.pki['ca.crt'] });
    expect(verified.problems).toEqual([]);
    expect(verified.attestationIds).toEqual(before.attestation_ids);
    expect(w.kube.events.at(-1)).toMatchObject({ type: 'Normal', reason: 'ManifestRepaired' });
    // The Run showed the repair before it was attempted.
    expect(w.kube.statusHistory(run).map((c) => c.reason)).toContain(Reasons.ManifestRepairing);
    // Converged again: nothing more to do.
    resetCounts(w);
    await reconcileIn(w, run);
    expect(writes(w)).toEqual({});
  });

  it('no signer: SignerUnavailable, nothing recorded', async () => {
    const w = await world();
    w.signerDown = true;
    const run = w.kube.put(runFixture(stepsDone(1)));
    await expect(reconcileIn(w, run)).rejects.toThrow('not found');
    expect(conditionOf(storedRun(w, run), ConditionTypes.Attested)).toMatchObject({
      reason: Reasons.SignerUnavailable,
    });
    expect(w.vault.rows).toHaveLength(0);
  });

  it('an unexpected failure is RecordingFailed with its message', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(succeeded, (r) => (r.spec.steps[0]!.id = 'BAD ID')));
    await expect(reconcileIn(w, run)).rejects.toThrow();
    expect(conditionOf(storedRun(w, run), ConditionTypes.AIBOMReady)).toMatchObject({
      status: 'False',
      reason: Reasons.RecordingFailed,
    });
  });

  it('a deleting Run is recorded to the end before its finalizer goes; a gone Run costs nothing', async () => {
    const w = await world();
    const run = w.kube.put(runFixture(stepsDone(1)));
    await reconcileIn(w, run);
    // The pipeline finishes the run and it is deleted before the controller saw the terminal phase.
    const deleting = w.kube.put(runFixture(succeeded, (r) => (r.metadata = { ...run.metadata })));
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.deletionTimestamp =
      '2026-03-01T12:00:00Z';
    await reconcileIn(w, deleting);
    expect(w.vault.rows.some((r) => r.kind === 'aibom')).toBe(true);
    expect(storedRun(w, run).metadata.finalizers).toEqual([]);

    w.kube.runs.clear();
    resetCounts(w);
    await reconcileIn(w, run);
    expect(w.kube.requests.total()).toBe(0);
    expect(writes(w)).toEqual({});
  });

  it('a status write that changes nothing the reconciler owns is skipped after a restart', async () => {
    // A fresh controller (a new leader) sees a converged Run: gather, compare, nothing to do.
    const w = await world();
    const run = w.kube.put(runFixture(succeeded));
    await reconcileIn(w, run);
    const again = await world();
    Object.assign(again, { kube: w.kube, vault: w.vault, blobs: w.blobs });
    resetCounts(w);
    await reconcileRun(
      { ...reconcilerDeps(w), recorder: again.recorder },
      run.metadata.namespace,
      run.metadata.name,
    );
    expect(writes(w)).toEqual({});
  });
});

/** A Run of `steps` tool steps with `caps` capabilities each, every step finished, the run Succeeded. */
function bigRun(steps: number, caps: number): Run {
  return runFixture((r) => {
    r.spec = {
      policyPack: { name: 'baseline', version: '1' },
      steps: Array.from({ length: steps }, (_, i) => ({
        id: `s${i}`,
        policyPack: { name: `pack-${i}`, version: '1' },
        tool: { name: `tool-${i}` },
        capabilities: Array.from({ length: caps }, (_, c) => ({ scope: `x:${i}:${c}`, grantedBy: 'team:t' })),
      })),
    };
  }, succeeded);
}

describe('Run reconciler: bounded work per reconcile (fairness)', () => {
  const limits = { records: 10, resources: 7 };

  it('records a large Run over several reconciles, each within the limits, to the same end state', async () => {
    const w = await world();
    // 9 × (3 capabilities + 1 step + 1 output artifact), 9 + 1 policies, 1 run, the AIBOM, its 2
    // views and its blob's artifact record
    const run = w.kube.put(bigRun(9, 3));
    const id = run.metadata.uid;
    const total = 9 * 5 + 10 + 1 + 4;
    let reconciles = 0;
    for (;;) {
      const rows = w.vault.rows.length;
      const resources = w.kube.attestations.size;
      const statusWrites = w.kube.requests.calls.get('PATCH runs/status') ?? 0;
      const terminalBefore = w.vault.claimed.has(terminalKey(id));
      const out = await reconcileRun(
        { ...reconcilerDeps(w), limits },
        run.metadata.namespace,
        run.metadata.name,
      );
      reconciles += 1;
      const newRows = w.vault.rows.slice(rows);
      const steps = newRows.filter(
        (r) =>
          r.kind === 'step' || r.kind === 'capability' || (r.kind === 'artifact' && r.record.stepId !== null),
      );
      // Whole steps of 5 records: at most 2 fit in 10.
      expect(steps.length % 5).toBe(0);
      expect(steps.length).toBeLessThanOrEqual(limits.records);
      expect(w.kube.attestations.size - resources).toBeLessThanOrEqual(limits.resources);
      // The terminal records and the AIBOM only once every step is recorded.
      if (!terminalBefore && w.vault.claimed.has(terminalKey(id))) {
        for (const s of run.spec.steps) expect(w.vault.claimed.has(stepKey(id, s.id)), s.id).toBe(true);
      }
      // The status never counts a record whose resource does not exist yet; an unfinished batch
      // writes no status at all (a status write of a large Run is expensive for the API server).
      expect(storedRun(w, run).status?.attestations?.count ?? 0).toBeLessThanOrEqual(
        w.kube.attestations.size,
      );
      if (out?.more === true) expect(w.kube.requests.calls.get('PATCH runs/status') ?? 0).toBe(statusWrites);
      if (out?.more !== true) break;
      expect(reconciles).toBeLessThan(100);
    }
    expect(reconciles).toBeGreaterThanOrEqual(Math.ceil(total / limits.resources));
    expect(w.vault.rows).toHaveLength(total);
    expect(w.kube.attestations.size).toBe(total);
    const done = storedRun(w, run);
    expect(done.status?.attestations?.count).toBe(total);
    expect(conditionOf(done, ConditionTypes.AIBOMReady)?.status).toBe('True');

    // The same Run reconciled without limits ends in the same records.
    const one = await world();
    const same = one.kube.put({ ...run, status: run.status! });
    expect(await reconcileIn(one, same)).toBeUndefined();
    const kinds = (rows: { kind: string }[]) => rows.map((r) => r.kind).sort();
    expect(kinds(one.vault.rows)).toEqual(kinds(w.vault.rows));
    // Converged: nothing more to do, no write.
    resetCounts(w);
    expect(
      await reconcileRun({ ...reconcilerDeps(w), limits }, run.metadata.namespace, run.metadata.name),
    ).toBeUndefined();
    expect(writes(w)).toEqual({});
  });

  it('records one whole step even when it alone is over the record limit', async () => {
    const w = await world();
    const run = w.kube.put(bigRun(2, 16));
    const out = await reconcileRun(
      { ...reconcilerDeps(w), limits: { records: 5, resources: 100 } },
      run.metadata.namespace,
      run.metadata.name,
    );
    expect(out).toEqual({ more: true });
    // 16 capabilities, the step and its output's artifact record.
    expect(w.vault.claimed.get(stepKey(run.metadata.uid, 's0'))).toHaveLength(18);
    expect(w.vault.claimed.has(stepKey(run.metadata.uid, 's1'))).toBe(false);
  });

  it('keeps the finalizer of a deleting Run while finished steps wait for a later batch', async () => {
    const w = await world();
    const run = w.kube.put(bigRun(6, 4));
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.deletionTimestamp =
      '2026-03-01T12:00:00Z';
    w.kube.runs.get(`${run.metadata.namespace}/${run.metadata.name}`)!.metadata.finalizers = [FINALIZER];
    const d = { ...reconcilerDeps(w), limits: { records: 5, resources: 100 } };
    expect(await reconcileRun(d, run.metadata.namespace, run.metadata.name)).toEqual({ more: true });
    expect(storedRun(w, run).metadata.finalizers).toEqual([FINALIZER]);
    while ((await reconcileRun(d, run.metadata.namespace, run.metadata.name))?.more === true);
    expect(w.vault.rows.some((r) => r.kind === 'aibom')).toBe(true);
    expect(storedRun(w, run).metadata.finalizers).toEqual([]);
  });
});

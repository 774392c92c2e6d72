/**
 * A vault that lost acknowledged records (docs/failover.md), against in-memory seams: the Run's
 * status and the bucket still show what the database forgot. The reconciler must notice, write the
 * loss down before recording anything again, record again from the Run (one record set, one AIBOM),
 * never overwrite the lost AIBOM's bytes, delete the Attestation resources that name lost ids, and
 * say on the Run what could not be repaired. The same against a real asynchronous failover:
 * test/integration/failover/async.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ConditionTypes, EventReasons, Reasons } from '../../../src/crd/reasons.ts';
import type { Run } from '../../../src/crd/run.ts';
import { aibomKeys, claimOf, lostRecords, type AibomMetadata } from '../../../src/recorder/index.ts';
import type { FakeVault } from '../../helpers/fakes.ts';
import { OwnWrites } from '../../../src/controller/run/own-writes.ts';
import { reconcileRun } from '../../../src/controller/run/reconciler.ts';
import {
  conditionOf,
  reconcileIn,
  reconcilerDeps,
  runFixture,
  storedRun,
  succeeded,
  world,
  type World,
} from './fixtures.ts';

/**
 * The vault as a standby that missed everything after its first `keep` records has it: later rows,
 * the claims naming them and the artifact records whose AIBOM attestation is gone are dropped.
 */
function loseAllBut(vault: FakeVault, keep: number): string[] {
  const lost = vault.rows.splice(keep).map((r) => r.id);
  const gone = new Set(lost);
  for (const [key, ids] of [...vault.claimed]) if (ids.some((id) => gone.has(id))) vault.claimed.delete(key);
  for (const [key, a] of [...vault.artifactRows]) {
    if (gone.has(String(a.metadata.aibom_attestation_id))) vault.artifactRows.delete(key);
  }
  return lost;
}

async function recorded(w: World): Promise<Run> {
  const run = w.kube.put(runFixture(succeeded));
  await reconcileIn(w, run);
  const now = storedRun(w, run);
  expect(conditionOf(now, ConditionTypes.AIBOMReady)?.status).toBe('True');
  return now;
}

describe('lost records (pure comparison)', () => {
  it('a vault ahead of the status is no loss; fewer records, a missing id or another AIBOM is', async () => {
    const w = await world();
    const run = await recorded(w);
    const held = {
      attestations: await w.vault.attestations.ofRun(run.metadata.namespace, run.metadata.uid),
      aibom: await w.vault.artifacts.get(run.metadata.uid, 'aibom'),
    };
    expect(lostRecords(run, held)).toBeNull();
    // Records committed after the status was written: normal.
    const behind = structuredClone(run);
    behind.status!.attestations!.count = 2;
    expect(lostRecords(behind, held)).toBeNull();
    const more = structuredClone(run);
    more.status!.attestations!.count = held.attestations.length + 1;
    expect(lostRecords(more, held)).toMatchObject({ held: held.attestations.length, missingIds: [] });
    const shorter = { ...held, attestations: held.attestations.slice(1) };
    expect(lostRecords(run, shorter)?.missingIds).toEqual([held.attestations[0]!.id]);
    expect(lostRecords(run, { ...held, aibom: null })).toMatchObject({ aibomLost: true });
    // The status names every record, the AIBOM blob's artifact record included (blob_attestation_id).
    const blobRecord = held.attestations.filter(
      (r) => r.kind === 'artifact' && r.subjects.includes(`artifact:${run.metadata.uid}:aibom`),
    );
    expect(blobRecord).toHaveLength(1);
    expect((run.status!.artifacts!.aibom as AibomMetadata).blob_attestation_id).toBe(blobRecord[0]!.id);
    expect(claimOf(run).ids).toEqual(held.attestations.map((r) => r.id).sort());
  });
});

describe('the reconciler after the vault lost a Run’s records', () => {
  it('writes the loss down once, records again from the Run, supersedes the lost AIBOM and says what was lost', async () => {
    const w = await world();
    const before = await recorded(w);
    const id = before.metadata.uid;
    const oldMeta = before.status!.artifacts!.aibom as AibomMetadata;
    const oldBlob = w.blobs.objects.get(oldMeta.key)!.body;
    const oldResources = [...w.kube.attestations.keys()];
    // The standby had the first three records (the capability, step and output artifact of
    // `retrieve`: one claimed batch).
    const lostIds = loseAllBut(w.vault, 3);
    expect(lostIds.length).toBeGreaterThan(3);
    // The status names them all, the AIBOM blob's artifact record included.
    const namedIds = lostIds;

    await reconcileIn(w, before);
    const after = storedRun(w, before);

    // Written down: one row naming the ids the status showed that are gone.
    const rows = [...w.vault.lossRows.values()];
    expect(rows.map((r) => r.details.source).sort()).toEqual(['bucket', 'run-status']);
    const fromStatus = rows.find((r) => r.details.source === 'run-status')!;
    expect(new Set(fromStatus.missingIds)).toEqual(new Set(namedIds));
    expect(fromStatus.runId).toBe(id);

    // Recorded again: every claim back, one record per step, one AIBOM record.
    const held = await w.vault.attestations.ofRun(before.metadata.namespace, id);
    expect(held.filter((r) => r.kind === 'aibom')).toHaveLength(1);
    expect(held.filter((r) => r.kind === 'run')).toHaveLength(1);
    expect(held.filter((r) => r.kind === 'step')).toHaveLength(3);
    const meta = after.status!.artifacts!.aibom as AibomMetadata;
    expect(meta.supersedes).toMatchObject({
      digest: oldMeta.digest,
      key: oldMeta.key,
      loss_id: expect.any(String) as unknown,
    });
    expect(new Set(meta.supersedes!.lost_attestation_ids)).toEqual(
      new Set(
        [
          ...oldMeta.attestation_ids,
          oldMeta.aibom_attestation_id,
          oldMeta.blob_attestation_id!,
          ...Object.values(oldMeta.views ?? {}).map((v) => v.attestation_id),
        ].filter((x) => lostIds.includes(x)),
      ),
    );
    // The lost AIBOM's bytes are where they were; the new one (other ids: other bytes) beside them.
    expect(meta.digest).not.toBe(oldMeta.digest);
    expect(meta.key).toBe(aibomKeys(before.metadata.namespace, id).superseding(meta.digest));
    expect(w.blobs.objects.get(oldMeta.key)!.body.equals(oldBlob)).toBe(true);
    expect(w.blobs.objects.has(meta.supersedes!.metadata_key)).toBe(true);

    // Kubernetes mirrors the vault again: resources of lost ids deleted, new ones created.
    expect([...w.kube.attestations.keys()].sort()).toEqual(held.map((r) => r.id).sort());
    expect(oldResources.filter((r) => w.kube.attestations.has(r))).toEqual(held.slice(0, 3).map((r) => r.id));
    expect(after.status?.attestations?.count).toBe(held.length);

    // Said on the Run, for good.
    expect(conditionOf(after, ConditionTypes.RecordsLost)).toMatchObject({
      status: 'True',
      reason: Reasons.RecordedAgain,
      message: expect.stringContaining(`loss ${fromStatus.id}`) as unknown,
    });
    expect(conditionOf(after, ConditionTypes.AIBOMReady)?.status).toBe('True');
    const warnings = w.kube.events.filter((e) => e.type === 'Warning').map((e) => e.reason);
    expect(warnings.sort()).toEqual([EventReasons.AIBOMSuperseded, EventReasons.RecordsLost]);

    // Converged: another reconcile finds nothing lost, writes nothing, says nothing.
    const lossCount = w.vault.lossRows.size;
    const events = w.kube.events.length;
    await reconcileIn(w, after);
    expect(w.vault.lossRows.size).toBe(lossCount);
    expect(w.kube.events.length).toBe(events);
    expect(conditionOf(storedRun(w, after), ConditionTypes.RecordsLost)?.status).toBe('True');
  });

  it('a lost AIBOM record whose records survived: the same bytes again, the loss still written down', async () => {
    const w = await world();
    const before = await recorded(w);
    const oldMeta = before.status!.artifacts!.aibom as AibomMetadata;
    // Only the last transaction (the AIBOM's: its record, its two views, its blob's artifact record) was lost.
    const lost = loseAllBut(w.vault, w.vault.rows.length - 4);
    expect(lost[0]).toEqual(oldMeta.aibom_attestation_id);
    expect(lost.slice(1, 3).sort()).toEqual(
      Object.values(oldMeta.views ?? {})
        .map((v) => v.attestation_id)
        .sort(),
    );
    await reconcileIn(w, before);
    const meta = storedRun(w, before).status!.artifacts!.aibom as AibomMetadata;
    expect(meta.digest).toBe(oldMeta.digest);
    expect(meta.key).toBe(oldMeta.key);
    expect(meta.aibom_attestation_id).not.toBe(oldMeta.aibom_attestation_id);
    // The superseded metadata names the AIBOM's record, its views' and its blob's record.
    expect([...meta.supersedes!.lost_attestation_ids].sort()).toEqual([...lost].sort());
    expect(conditionOf(storedRun(w, before), ConditionTypes.RecordsLost)?.status).toBe('True');
  });
});

describe('a loss only the bucket shows', () => {
  // The AIBOM's transaction committed on the old primary and its metadata copy went to the bucket,
  // then the database went away before the status naming the AIBOM was written (the reconcile's
  // next vault read failed): the status claims only records the standby holds. Seen once in a full
  // suite run of test/integration/failover/async.test.ts: the Run had a loss row and no condition.
  async function bucketOnly(): Promise<{ w: World; before: Run; run: Run }> {
    const w = await world();
    const before = await recorded(w);
    loseAllBut(w.vault, w.vault.rows.length - 4);
    const held = await w.vault.attestations.ofRun(before.metadata.namespace, before.metadata.uid);
    // The controller's last status write, as the failed reconcile left it: no AIBOM shown.
    const { artifacts: _shown, ...status } = before.status!;
    await w.kube.runApi().applyStatus(before, { ...status, attestations: { count: held.length } });
    const run = storedRun(w, before);
    expect(run.status?.artifacts?.aibom).toBeUndefined();
    expect(lostRecords(run, { attestations: held, aibom: null })).toBeNull();
    return { w, before, run };
  }

  it('says the loss on the Run for good, with a Warning Event, once', async () => {
    const { w, before, run } = await bucketOnly();
    await reconcileIn(w, run);
    const after = storedRun(w, run);
    const rows = [...w.vault.lossRows.values()];
    expect(rows.map((r) => r.details.source)).toEqual(['bucket']);
    const meta = after.status!.artifacts!.aibom as AibomMetadata;
    expect(meta.supersedes?.digest).toBe((before.status!.artifacts!.aibom as AibomMetadata).digest);
    expect(conditionOf(after, ConditionTypes.RecordsLost)).toMatchObject({
      status: 'True',
      reason: Reasons.RecordedAgain,
      message: expect.stringContaining(`loss ${rows[0]!.id}`) as unknown,
    });
    const warnings = w.kube.events.filter((e) => e.type === 'Warning').map((e) => e.reason);
    expect(warnings.sort()).toEqual([EventReasons.AIBOMSuperseded, EventReasons.RecordsLost]);
    // Converged: nothing more is said, and the condition stays.
    const events = w.kube.events.length;
    await reconcileIn(w, after);
    expect(w.kube.events.length).toBe(events);
    expect(conditionOf(storedRun(w, after), ConditionTypes.RecordsLost)?.status).toBe('True');
  });

  it('is said by a later reconcile when the one that superseded the AIBOM could not write the status', async () => {
    const { w, run } = await bucketOnly();
    // The status write after the new AIBOM fails once (the API server away): the retry finds the
    // AIBOM recorded, nothing to record, and must still say the loss its record names.
    const api = w.kube.runApi();
    let failures = 1;
    const flaky = {
      ...api,
      applyStatus: async (r: Run, s: NonNullable<Run['status']>) => {
        if (s.artifacts?.aibom !== undefined && failures-- > 0) throw new Error('connection refused');
        return api.applyStatus(r, s);
      },
    };
    await expect(reconcileIn(w, run, flaky)).rejects.toThrow('connection refused');
    await reconcileIn(w, storedRun(w, run));
    const after = storedRun(w, run);
    expect(conditionOf(after, ConditionTypes.RecordsLost)?.status).toBe('True');
    expect(w.kube.events.filter((e) => e.reason === EventReasons.RecordsLost)).toHaveLength(1);
  });
});

describe('a loss judged on a stale cached Run', () => {
  it('is never unsaid by a reconcile acting on a cached copy older than the status that said it', async () => {
    const w = await world();
    const before = await recorded(w);
    loseAllBut(w.vault, 3);
    const written = new OwnWrites();
    const deps = { ...reconcilerDeps(w), written };
    await reconcileRun(deps, before.metadata.namespace, before.metadata.name);
    const said = storedRun(w, before);
    expect(conditionOf(said, ConditionTypes.RecordsLost)?.status).toBe('True');
    // The informer lags: its copy predates both the lost records' status and the one that said the
    // loss (it claims only what the vault still holds), and a reconcile is asked for meanwhile.
    const stale = structuredClone(said);
    stale.status = {
      ...stale.status,
      attestations: { count: 1 },
      conditions: stale.status!.conditions!.filter((c) => c.type !== ConditionTypes.RecordsLost),
    };
    delete stale.status.artifacts;
    written.force(`${before.metadata.namespace}/${before.metadata.name}`);
    const api = { ...w.kube.runApi(), cached: () => structuredClone(stale) };
    const patches = w.kube.requests.calls.get('PATCH runs/status') ?? 0;
    // A batch of resources per reconcile (the stale count says they are missing), then the status.
    for (let i = 0; i < 10; i++) {
      written.force(`${before.metadata.namespace}/${before.metadata.name}`);
      const result = await reconcileRun({ ...deps, api }, before.metadata.namespace, before.metadata.name);
      if (!result?.more) break;
    }
    // The stale copy's status differs from what the vault shows: written again.
    expect(w.kube.requests.calls.get('PATCH runs/status')).toBe(patches + 1);
    expect(conditionOf(storedRun(w, before), ConditionTypes.RecordsLost)).toMatchObject({
      status: 'True',
      message: conditionOf(said, ConditionTypes.RecordsLost)!.message,
    });
  });

  it('is written down from the live Run: one row naming every id the newest status shows', async () => {
    const w = await world();
    const before = await recorded(w);
    const lostIds = loseAllBut(w.vault, 0); // every record, the AIBOM blob's included, is named
    // The informer still holds an older copy: only the first step counted, no AIBOM shown.
    const stale = structuredClone(before);
    stale.status = { ...stale.status, attestations: { count: 1 } };
    delete stale.status.artifacts;
    const api = { ...w.kube.runApi(), cached: () => structuredClone(stale) };
    await reconcileIn(w, before, api);
    const rows = [...w.vault.lossRows.values()].filter((r) => r.details.source === 'run-status');
    expect(rows).toHaveLength(1);
    expect(new Set(rows[0]!.missingIds)).toEqual(new Set(lostIds));
    expect(w.kube.requests.calls.get('GET run')).toBe(1);
  });
});

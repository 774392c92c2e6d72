/**
 * The AIBOM bytes missing or replaced in the object store (docs/failover.md): a repair rebuilds them
 * from the vault and puts them back only when they hash to the recorded digest; otherwise the repair
 * fails for good and the store is left as it is (nothing is ever signed over other bytes). The same
 * against real S3 servers: test/integration/blob/objects.test.ts.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { runFixture, succeeded, world } from '../controller/fixtures.ts';

const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

async function recorded() {
  const w = await world();
  const run = runFixture(succeeded);
  await w.recorder.recordSteps(
    run,
    run.spec.steps.map((s) => s.id),
  );
  await w.recorder.recordTerminal(run);
  const { artifact } = await w.recorder.recordAibom(run);
  return { w, run, artifact, meta: artifact.metadata as unknown as AibomMetadata };
}

describe('restoring AIBOM bytes from the vault', () => {
  it('puts deleted bytes back, then signs a manifest over them', async () => {
    const { w, run, artifact, meta } = await recorded();
    w.blobs.objects.delete(meta.key);
    const repair = w.vault.requestRepair(run.metadata.uid, 'missing');
    const out = await w.recorder.repairManifest(run, artifact, repair);
    expect(out.outcome).toBe('done');
    expect(sha256(w.blobs.objects.get(meta.key)!.body)).toBe(meta.digest);
  });

  it('puts replaced bytes back', async () => {
    const { w, run, artifact, meta } = await recorded();
    w.blobs.objects.set(meta.key, { body: Buffer.from('{"not":"it"}'), metadata: {} });
    const out = await w.recorder.repairManifest(
      run,
      artifact,
      w.vault.requestRepair(run.metadata.uid, 'invalid'),
    );
    expect(out.outcome).toBe('done');
    expect(sha256(w.blobs.objects.get(meta.key)!.body)).toBe(meta.digest);
  });

  it('fails for good, writing nothing, when the vault no longer rebuilds the recorded bytes', async () => {
    const { w, run, artifact, meta } = await recorded();
    const replaced = Buffer.from('{"not":"it"}');
    w.blobs.objects.set(meta.key, { body: replaced, metadata: {} });
    // The vault's records of the run differ from those the AIBOM was built from.
    w.vault.rows.splice(0, 1);
    const puts = w.blobs.writes.calls.get('put') ?? 0;
    const out = await w.recorder.repairManifest(
      run,
      artifact,
      w.vault.requestRepair(run.metadata.uid, 'invalid'),
    );
    expect(out.outcome).toBe('failed');
    expect(out.repair.lastError).toMatch(/the vault no longer rebuilds them/);
    expect(w.blobs.objects.get(meta.key)!.body.equals(replaced)).toBe(true);
    expect(w.blobs.writes.calls.get('put') ?? 0).toBe(puts);
  });
});

import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { aibomRunOf } from '../../src/aibom/index.ts';
import { isFinished, type Run, type RunSpec, type StepStatus } from '../../src/crd/run.ts';
import { recordAibom } from '../../src/recorder/aibom.ts';
import { stepBatch, terminalBatch } from '../../src/recorder/extract.ts';
import { appendOnce } from '../../src/recorder/once.ts';
import { sealBatch } from '../../src/recorder/seal.ts';
import type { KeySigner } from '../../src/signing/index.ts';
import type { Vault } from '../../src/vault/index.ts';
import { stackBlobs } from './blobs.ts';

/**
 * A Succeeded run as the controller records it, without a controller: the runs mirror, every
 * step's records, the terminal records and the AIBOM (stored in the stack's MinIO with its C2PA
 * manifest, its metadata record in PostgreSQL). For tests of what leaves the service.
 */
export async function recordedRun(
  vault: Vault,
  signer: KeySigner,
  namespace: string,
  name: string,
  spec: RunSpec,
): Promise<Run> {
  const at = Date.parse('2026-03-01T10:00:00Z');
  const steps: StepStatus[] = spec.steps.map((s, i) => ({
    id: s.id,
    phase: 'Succeeded',
    startedAt: new Date(at + i * 1000).toISOString(),
    finishedAt: new Date(at + i * 1000 + 500).toISOString(),
    output: { result: s.id },
  }));
  const r: Run = {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: { name, namespace, uid: randomUUID(), generation: 1 },
    spec,
    status: { phase: 'Succeeded', steps },
  };
  await vault.runs.upsert(r);
  for (const step of spec.steps) {
    const st = steps.find((s) => s.id === step.id);
    if (!isFinished(st)) continue;
    const b = stepBatch(r, step, st);
    await appendOnce(vault.claims, b.key, sealBatch(b.items, signer));
  }
  const t = terminalBatch(r, new Date());
  await appendOnce(vault.claims, t.key, sealBatch(t.items, signer));
  await recordAibom({ vault, blobs: stackBlobs(), signer, logger: pino({ level: 'silent' }) }, aibomRunOf(r));
  return r;
}

/**
 * A sealing thread for the ingest benchmark: builds and seals records (statement, canonical JSON,
 * signature, digest: `buildRecord`, the same code as on the main thread) with its own copy of the
 * signer, so a bulk writer can seal on one core while the other runs the append and PostgreSQL.
 *
 * `startSealWorker` is the parent side; the same file is the worker's entry point.
 */
import { once } from 'node:events';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { signerFromPem, type TlsMaterial } from '../src/signing/index.ts';
import type { NewAttestation } from '../src/vault/index.ts';
import type { BenchContext } from './common.ts';
import { buildRecord, type RunShape } from './records.ts';

/** One record to seal: the i-th record of a run. */
export interface SealSpec {
  readonly run: RunShape;
  readonly i: number;
}

export interface SealWorker {
  /** Seals the specs in order; one request at a time is in flight per call site. */
  seal(specs: readonly SealSpec[]): Promise<NewAttestation[]>;
  close(): Promise<void>;
}

type Request = { id: number; specs: readonly SealSpec[] };
type Reply = { id: number; records?: NewAttestation[]; error?: string };

/** `pki`: the PEM Secret data (`tls.key`, `tls.crt`, `ca.crt`) the main thread's signer came from. */
export function startSealWorker(ctx: BenchContext, pki: TlsMaterial): SealWorker {
  const worker = new Worker(new URL(import.meta.url), { workerData: { pki } });
  const exited = once(worker, 'exit');
  const close = ctx.track(async () => {
    await worker.terminate();
    await exited;
  });
  const waiting = new Map<number, { resolve: (r: NewAttestation[]) => void; reject: (e: Error) => void }>();
  worker.on('message', (reply: Reply) => {
    const w = waiting.get(reply.id);
    waiting.delete(reply.id);
    if (reply.error !== undefined) w?.reject(new Error(`seal worker: ${reply.error}`));
    else w?.resolve(reply.records!);
  });
  worker.on('error', (err: Error) => {
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  });
  let next = 0;
  return {
    seal: (specs) =>
      new Promise((resolve, reject) => {
        const id = next++;
        waiting.set(id, { resolve, reject });
        worker.postMessage({ id, specs } satisfies Request);
      }),
    close,
  };
}

if (!isMainThread && parentPort !== null) {
  const port = parentPort;
  const signer = signerFromPem((workerData as { pki: TlsMaterial }).pki);
  port.on('message', (req: Request) => {
    try {
      port.postMessage({
        id: req.id,
        records: req.specs.map((s) => buildRecord(signer, s.run, s.i)),
      } satisfies Reply);
    } catch (err) {
      port.postMessage({ id: req.id, error: (err as Error).message } satisfies Reply);
    }
  });
}

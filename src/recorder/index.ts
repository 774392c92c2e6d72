import type { Run } from '../api/run.ts';
import { aibomRunOf } from '../aibom/index.ts';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner, Signer } from '../signing/index.ts';
import type { ArtifactRecord, AttestationKind } from '../vault/index.ts';
import { recordAibom, type AibomStore } from './aibom.ts';
import { because } from './errors.ts';
import { finishedSteps, stepBatch, terminalBatch, type Batch } from './extract.ts';
import { appendOnce } from './once.ts';
import { sealBatch } from './seal.ts';

/**
 * The recorder: extract → sign → store, in one place (the tektoncd/chains shape). The Run
 * reconciler decides *what* is due and calls one of three methods; each is idempotent (claims per
 * key, content-addressed objects, insert-once records), so a crash or a racing replica at any
 * point is repaired by calling it again. Failures carry the condition reason of the dependency they
 * failed on (RecordError, errors.ts).
 *
 *   extract.ts  Run → statements (pure)       seal.ts  statement → signed vault record
 *   once.ts     records → vault, once per key aibom.ts the AIBOM: build → sign → C2PA → store
 */

export { AIBOM_MEDIA_TYPE, aibomKeys, CLAIM_GENERATOR, computeAibom, type AibomMetadata } from './aibom.ts';
export { RecordError, type RecordErrorCode } from './errors.ts';
export { aibomKey, finishedSteps, stepKey, terminalKey } from './extract.ts';
export { sealRecord, type RecordMeta } from './seal.ts';

/** One batch as stored: the ids that stand for its key, and whether this call wrote them. */
export interface Recorded {
  readonly key: string;
  /** What the batch is about, for Events: `step <id>` or `run and policies`. */
  readonly what: string;
  readonly ids: readonly string[];
  readonly created: boolean;
}

export interface Recorder {
  /** Records the given finished steps of `run` (capability tokens, then the step), each once. */
  recordSteps(run: Run, stepIds: readonly string[]): Promise<Recorded[]>;
  /** At a terminal phase: the policies the run used and its SLSA provenance, once. */
  recordTerminal(run: Run): Promise<Recorded>;
  /** At a terminal phase, after recordTerminal: the AIBOM, once; returns its metadata record. */
  recordAibom(run: Run): Promise<{ artifact: ArtifactRecord; created: boolean }>;
}

/** What the recorder reports as it stores records (the controller's metrics: src/metrics). */
export interface RecordingObserver {
  /** `count` records of `kind` were stored by this call (a call that found them stored reports nothing). */
  recorded(kind: AttestationKind, count: number): void;
  /** The AIBOM of a run that ended `status` (`succeeded`, `failed`) was stored by this call. */
  aibomRecorded(status: string): void;
}

export interface RecorderDeps {
  readonly vault: AibomStore;
  readonly blobs: BlobStore;
  /** Signs the AIBOM (the runtime trust signer). */
  readonly runtimeSigner: KeySigner;
  /** Signs envelopes: a namespace's customer-supplied key, else the service signer. */
  readonly envelopeSigner: (namespace: string) => Promise<Signer>;
  /** SERVICE_TRANSPARENCY_WRITER=1: every record's SCITT job commits with it. */
  readonly enqueueTransparency?: boolean;
  readonly logger: Logger;
  readonly now?: () => Date;
  readonly observer?: RecordingObserver;
}

export function createRecorder(deps: RecorderDeps): Recorder {
  const now = deps.now ?? (() => new Date());
  const enqueueTransparency = deps.enqueueTransparency === true;

  const store = async (run: Run, batch: Batch, what: string): Promise<Recorded> => {
    const signer = await because('SignerUnavailable', () => deps.envelopeSigner(run.metadata.namespace));
    const records = sealBatch(batch.items, signer);
    const { ids, created } = await because('VaultUnavailable', () =>
      appendOnce(deps.vault.claims, batch.key, records, { enqueueTransparency }),
    );
    if (created) for (const r of records) deps.observer?.recorded(r.kind, 1);
    return { key: batch.key, what, ids, created };
  };

  return {
    async recordSteps(run, stepIds) {
      const wanted = new Set(stepIds);
      const out: Recorded[] = [];
      for (const { step, status } of finishedSteps(run)) {
        if (!wanted.has(step.id)) continue;
        out.push(await store(run, stepBatch(run, step, status), `step ${step.id}`));
      }
      return out;
    },

    recordTerminal: (run) => store(run, terminalBatch(run, now()), 'run and policies'),

    async recordAibom(run) {
      const result = await recordAibom(
        {
          vault: deps.vault,
          blobs: deps.blobs,
          signer: deps.runtimeSigner,
          logger: deps.logger,
          enqueueTransparency,
        },
        aibomRunOf(run),
      );
      if (result.created) {
        deps.observer?.recorded('aibom', 1);
        deps.observer?.aibomRecorded(String(result.artifact.metadata.status));
      }
      return result;
    },
  };
}

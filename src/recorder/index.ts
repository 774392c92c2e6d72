import type { Run } from '../crd/run.ts';
import { aibomRunOf } from '../aibom/index.ts';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner } from '../signing/index.ts';
import type { EnvelopeSigner } from '../signing/namespace-signers.ts';
import { forgetRememberedSigners } from '../export/keys.ts';
import type { TransparencyView } from '../transparency/jobs.ts';
import type {
  ArtifactRecord,
  AttestationKind,
  Loss,
  ManifestRepair,
  SignerCertificateRepository,
} from '../vault/index.ts';
import {
  CONTROLLER_ACTOR,
  recordAibom,
  refreshAibomMetadata,
  repairManifest,
  type AibomDeps,
  type AibomStore,
} from './aibom.ts';
import { because } from './errors.ts';
import type { Timestamper } from '../timestamp/index.ts';
import { finishedSteps, stepBatch, terminalBatch } from './extract.ts';
import { lossRow, supersededLoss, type RecordLoss } from './losses.ts';
import { rememberKey, storeBatch } from './store.ts';

/**
 * The recorder: extract → sign → store, in one place (the tektoncd/chains shape). The Run
 * reconciler decides *what* is due and calls one of three methods; each is idempotent (claims per
 * key, content-addressed objects, insert-once records), so a crash or a racing replica at any
 * point is repaired by calling it again. Failures carry the condition reason of the dependency they
 * failed on (RecordError, errors.ts).
 *
 *   extract.ts  Run → statements (pure)       seal.ts  statement → signed vault record
 *   once.ts     records → vault, once per key aibom.ts the AIBOM: build → sign → C2PA → store
 *   views.ts    the AIBOM's standard views, sealed as records in the AIBOM's batch
 *   store.ts    one batch: extract → sign → store once, with its capability grants
 */

export {
  AIBOM_MEDIA_TYPE,
  aibomKeys,
  CLAIM_GENERATOR,
  computeAibom,
  computeAibomViews,
  CONTROLLER_ACTOR,
  timestampMetadata,
  type AibomMetadata,
  type TimestampMetadata,
} from './aibom.ts';
export { currentMetadata, latestRepair, pendingRepair } from './metadata.ts';
export {
  claimOf,
  lossMessage,
  lossRow,
  lostRecords,
  supersededLoss,
  supersededMessage,
  type RecordLoss,
  type RunClaim,
  type SupersededLoss,
} from './losses.ts';
export { RecordError, type RecordErrorCode } from './errors.ts';
export { aibomKey, finishedSteps, stepKey, terminalKey } from './extract.ts';
export { sealRecord, type RecordMeta } from './seal.ts';
export type { ViewMetadata } from './views.ts';

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
  /**
   * Writes down in the vault that it lost records the Run's status shows (losses.ts), once per
   * loss; before anything is recorded again in their place. Whatever this process remembers as
   * stored (the signer certificates) is forgotten: the vault may have lost that too.
   */
  recordLoss(run: Run, loss: RecordLoss): Promise<{ loss: Loss; created: boolean }>;
  /** Serves an open manifest repair of the Run's AIBOM: a new manifest over the same bytes. */
  repairManifest(
    run: Run,
    artifact: ArtifactRecord,
    repair: ManifestRepair,
  ): Promise<{ repair: ManifestRepair; outcome: 'done' | 'failed' }>;
  /** Rewrites `aibom.meta.json` with the AIBOM's transparency entry as it is now. */
  refreshAibomMetadata(runId: string, transparency: TransparencyView): Promise<void>;
}

/** What the recorder reports as it stores records (the controller's metrics: src/metrics). */
export interface RecordingObserver {
  /** `count` records of `kind` were stored by this call (a call that found them stored reports nothing). */
  recorded(kind: AttestationKind, count: number): void;
  /** The AIBOM of a run that ended `status` (`succeeded`, `failed`) was stored by this call. */
  aibomRecorded(status: string): void;
  /** A loss was written down (`source`: the Run's status or the bucket), naming `records` lost records. */
  lossRecorded?(source: 'run-status' | 'bucket', records: number): void;
}

export interface RecorderDeps {
  readonly vault: AibomStore;
  readonly blobs: BlobStore;
  /**
   * Signs the AIBOM (the runtime trust signer). A function when the signer can be rotated while
   * running: it is read once per AIBOM, so one AIBOM's signatures all come from one key.
   */
  readonly runtimeSigner: KeySigner | (() => KeySigner);
  /**
   * Signs envelopes: a namespace's customer-supplied key, else the service signer; says which
   * (namespaceSigners), for the key store and the capability chain's root.
   */
  readonly envelopeSigner: (namespace: string) => Promise<EnvelopeSigner>;
  /** SERVICE_TRANSPARENCY_WRITER=1: every record's SCITT job commits with it. */
  readonly enqueueTransparency?: boolean;
  /**
   * The key store of the key-distribution endpoint: each signer's chain is recorded the first time
   * it signs, before its first record is stored (so every stored record's key resolves).
   */
  readonly signers?: Pick<SignerCertificateRepository, 'record'>;
  /**
   * SERVICE_CAPABILITY_TOKENS (default on): mint the VC and Biscuit projections of each capability
   * chain with its records. Off: chains are still recorded, without tokens.
   */
  readonly capabilityTokens?: boolean;
  /**
   * TSA_URL: RFC 3161 time-stamps on the AIBOM's C2PA manifest and runtime signature (taken before
   * the AIBOM is stored, ADR 0014), and a time-stamp job with every record (the controller's
   * stamper takes those after the record is stored, ADR 0015).
   */
  readonly timestamper?: Timestamper;
  readonly logger: Logger;
  readonly now?: () => Date;
  readonly observer?: RecordingObserver;
}

export function createRecorder(deps: RecorderDeps): Recorder {
  const now = deps.now ?? (() => new Date());
  /** One signer for a whole AIBOM (bytes, C2PA claim, attestation), whatever rotates meanwhile. */
  const aibomSigner = async (run: Run): Promise<KeySigner> => {
    const signer = await because('SignerUnavailable', () =>
      Promise.resolve(typeof deps.runtimeSigner === 'function' ? deps.runtimeSigner() : deps.runtimeSigner),
    );
    await rememberKey(deps, signer, run.metadata.namespace, 'service');
    return signer;
  };

  return {
    async recordSteps(run, stepIds) {
      const wanted = new Set(stepIds);
      const out: Recorded[] = [];
      for (const { step, status } of finishedSteps(run)) {
        if (!wanted.has(step.id)) continue;
        out.push(
          await storeBatch(deps, run, (root) => stepBatch(run, step, status, root), `step ${step.id}`),
        );
      }
      return out;
    },

    recordTerminal: (run) => storeBatch(deps, run, () => terminalBatch(run, now()), 'run and policies'),

    recordAibom: async (run) => {
      const signer = await aibomSigner(run);
      const result = await recordAibom(aibomDeps(deps, run, signer), aibomRunOf(run));
      if (result.created) reportAibom(deps.observer, result.artifact);
      return result;
    },

    recordLoss: (run, loss) => writeLoss(deps, run, loss),

    repairManifest: async (run, artifact, repair) => {
      const signer = await aibomSigner(run);
      return repairManifest(aibomDeps(deps, run, signer), artifact, repair, aibomRunOf(run));
    },

    refreshAibomMetadata: (runId, transparency) =>
      refreshAibomMetadata({ vault: deps.vault, blobs: deps.blobs }, runId, transparency),
  };
}

/** What making, storing or repairing one Run's AIBOM needs, signed by `signer`. */
function aibomDeps(deps: RecorderDeps, run: Run, signer: KeySigner): AibomDeps {
  return {
    vault: deps.vault,
    blobs: deps.blobs,
    signer,
    logger: deps.logger.child({ run: `${run.metadata.namespace}/${run.metadata.name}` }),
    enqueueTransparency: deps.enqueueTransparency === true,
    ...(deps.timestamper ? { timestamper: deps.timestamper } : {}),
    // A Run being deleted must not wait on the TSA (docs/adr/0014).
    allowUntimestamped: run.metadata.deletionTimestamp !== undefined,
  };
}

/** Reports an AIBOM this call stored: it, its standard views and the AIBOM blob's artifact record, and a lost one it supersedes. */
function reportAibom(observer: RecordingObserver | undefined, artifact: ArtifactRecord): void {
  if (observer === undefined) return;
  observer.recorded('aibom', 1);
  // The AIBOM's standard views and the AIBOM blob's artifact record, stored in its batch.
  const views = (artifact.metadata as { views?: Record<string, unknown> }).views ?? {};
  observer.recorded('artifact', Object.keys(views).length + 1);
  observer.aibomRecorded(String(artifact.metadata.status));
  const superseded = supersededLoss(artifact);
  if (superseded) observer.lossRecorded?.('bucket', superseded.lost_attestation_ids.length);
}

/**
 * Writes a loss down (once per loss), after forgetting whatever this process remembers as stored
 * (the signer certificates: the vault may have lost those too); logged as an error the first time.
 */
async function writeLoss(
  deps: RecorderDeps,
  run: Run,
  loss: RecordLoss,
): Promise<{ loss: Loss; created: boolean }> {
  forgetRememberedSigners();
  const out = await because('VaultUnavailable', () =>
    deps.vault.losses.record(lossRow(loss, CONTROLLER_ACTOR)),
  );
  if (out.created) {
    deps.observer?.lossRecorded?.(
      'run-status',
      Math.max(loss.claim.count - loss.held, loss.missingIds.length),
    );
    deps.logger.error(
      {
        run: `${run.metadata.namespace}/${run.metadata.name}`,
        runId: run.metadata.uid,
        loss: out.loss.id,
        claimed: loss.claim.count,
        held: loss.held,
        missing: loss.missingIds.length,
      },
      'the vault lost records the Run status shows; recording them again from the Run',
    );
  }
  return out;
}

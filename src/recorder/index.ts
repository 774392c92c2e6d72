import type { Run } from '../api/run.ts';
import { aibomRunOf } from '../aibom/index.ts';
import type { BlobStore } from '../blob/store.ts';
import type { Logger } from '../log/index.ts';
import type { KeySigner, Signer } from '../signing/index.ts';
import type { Timestamper } from '../timestamp/index.ts';
import type { ArtifactRecord } from '../vault/index.ts';
import { recordAibom, type AibomStore } from './aibom.ts';
import { because } from './errors.ts';
import { finishedSteps, stepBatch, terminalBatch, type Batch } from './extract.ts';
import { appendOnce } from './once.ts';
import { sealBatch } from './seal.ts';
import { signerHistory } from './signers.ts';

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

export {
  AIBOM_MEDIA_TYPE,
  aibomKeys,
  CLAIM_GENERATOR,
  computeAibom,
  timestampMetadata,
  type AibomMetadata,
  type TimestampMetadata,
} from './aibom.ts';
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

export interface RecorderDeps {
  readonly vault: AibomStore;
  readonly blobs: BlobStore;
  /**
   * Signs the AIBOM (the runtime trust signer). A function when the signer can be rotated while
   * running: it is read once per AIBOM, so one AIBOM's signatures all come from one key.
   */
  readonly runtimeSigner: KeySigner | (() => KeySigner);
  /** Signs envelopes: a namespace's customer-supplied key, else the service signer. */
  readonly envelopeSigner: (namespace: string) => Promise<Signer>;
  /** SERVICE_TRANSPARENCY_WRITER=1: every record's SCITT job commits with it. */
  readonly enqueueTransparency?: boolean;
  /** TSA_URL: RFC 3161 time-stamps on the AIBOM's C2PA manifest and runtime signature. */
  readonly timestamper?: Timestamper;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export function createRecorder(deps: RecorderDeps): Recorder {
  const now = deps.now ?? (() => new Date());
  const enqueueTransparency = deps.enqueueTransparency === true;
  const runtimeSigner = (): KeySigner =>
    typeof deps.runtimeSigner === 'function' ? deps.runtimeSigner() : deps.runtimeSigner;

  const noteSigner = signerHistory(deps.vault.signers);
  // Service signers handed out so far: tells an envelope signer that is the service's (possibly
  // rotated away meanwhile) from a tenant's own key, for the signer history.
  const serviceSigners = new WeakSet<Signer>();
  const service = (): KeySigner => {
    const s = runtimeSigner();
    serviceSigners.add(s);
    return s;
  };

  const store = async (run: Run, batch: Batch, what: string): Promise<Recorded> => {
    const namespace = run.metadata.namespace;
    // The service signer of this moment is registered before the envelope signer is asked for, so
    // an envelope signer that is the service's is known as such even if it rotates in between.
    try {
      service();
    } catch {
      // no service signer: a namespace with its own key can still record
    }
    const signer = await because('SignerUnavailable', () => deps.envelopeSigner(namespace));
    await because('VaultUnavailable', () =>
      noteSigner(
        signer,
        serviceSigners.has(signer) ? { scope: 'service' } : { scope: 'customer', namespace },
      ),
    );
    const records = sealBatch(batch.items, signer);
    const { ids, created } = await because('VaultUnavailable', () =>
      appendOnce(deps.vault.claims, batch.key, records, { enqueueTransparency }),
    );
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

    recordAibom: async (run) => {
      // One signer for the whole AIBOM (bytes, C2PA claim, attestation), whatever rotates meanwhile.
      const signer = await because('SignerUnavailable', () => Promise.resolve(service()));
      await because('VaultUnavailable', () => noteSigner(signer, { scope: 'service' }));
      return recordAibom(
        {
          vault: deps.vault,
          blobs: deps.blobs,
          signer,
          logger: deps.logger.child({ run: `${run.metadata.namespace}/${run.metadata.name}` }),
          enqueueTransparency,
          ...(deps.timestamper ? { timestamper: deps.timestamper } : {}),
          // A Run being deleted must not wait on the TSA (docs/adr/0007).
          allowUntimestamped: run.metadata.deletionTimestamp !== undefined,
        },
        aibomRunOf(run),
      );
    },
  };
}

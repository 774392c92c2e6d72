import { hkdfSync } from 'node:crypto';
import type pg from 'pg';
import { attestationRepository, type AttestationRepository } from './attestations.ts';
import { artifactRepository, type ArtifactRepository } from './artifacts.ts';
import { auditRepository, type AuditRepository } from './audit.ts';
import { uiSessionRepository, type UiSessionRepository } from './ui-sessions.ts';
import { checkpointRepository, type CheckpointRepository } from './checkpoints.ts';
import { capabilityGrantRepository, type CapabilityGrantRepository } from './capability-grants.ts';
import { claimRepository, type ClaimRepository } from './claims.ts';
import { CursorCodec, loadCursorKey } from './cursor.ts';
import { createListener, type VaultListener } from './listener.ts';
import { lossRepository, type LossRepository } from './losses.ts';
import { manifestRepairRepository, type ManifestRepairRepository } from './manifest-repairs.ts';
import { createVaultPool, runtimeRoleProblems, type VaultPoolOptions } from './pool.ts';
import { partitionRepository, type PartitionRepository } from './partitions.ts';
import { runRepository, type RunRepository } from './runs.ts';
import { runListRepository, type RunListRepository } from './run-list.ts';
import { scittLogStorage, type ScittLogStorage } from './scitt-log.ts';
import { tlogRepository, type TlogRepository } from './tlog.ts';
import { signerCertificateRepository, type SignerCertificateRepository } from './signer-certs.ts';
import { timestampRepository, type TimestampRepository } from './timestamps.ts';
import { transparencyJobRepository, type TransparencyJobRepository } from './transparency-jobs.ts';

/**
 * The vault: PostgreSQL, the system of record. It owns its pool; everything else reaches the
 * tables through the repositories below, each named for what it holds. Nothing outside src/vault
 * imports `pg` (eslint.config.js).
 */

export {
  type AibomRecords,
  type AttestationAppendOptions,
  type AttestationRepository,
  type AttestationSummary,
} from './attestations.ts';
export { type ArtifactRecord, type ArtifactRepository, type NewArtifact } from './artifacts.ts';
export { type UiSessionRepository } from './ui-sessions.ts';
export { type AuditEntry, type AuditListRequest, type AuditRecord, type AuditRepository } from './audit.ts';
export { type ChainBreak, type ChainReport, type VerifyChainOptions } from './chain.ts';
export {
  CHECKPOINT_CHANNEL,
  CHECKPOINT_REQUEST_CHANNEL,
  type CheckpointReceipt,
  type CheckpointRepository,
  type LeafRecord,
  type StoredCheckpoint,
  type TreeNode,
} from './checkpoints.ts';
export { type CapabilityGrantRepository } from './capability-grants.ts';
export { type ClaimedAppendOptions, type ClaimRepository } from './claims.ts';
export { CursorCodec, loadCursorKey } from './cursor.ts';
export {
  isVaultUnavailable,
  SQLSTATE_APPEND_ONLY,
  SQLSTATE_INSUFFICIENT_PRIVILEGE,
  VaultError,
  type VaultErrorCode,
} from './errors.ts';
export { type Subscription, type VaultListener } from './listener.ts';
export { lossFingerprint, type Loss, type LossRepository, type LossScope, type NewLoss } from './losses.ts';
export {
  REPAIR_CHANNEL,
  type ManifestRepair,
  type ManifestRepairRepository,
  type RepairedManifest,
  type RepairReason,
  type RepairRequest,
  type RepairState,
} from './manifest-repairs.ts';
export {
  DEFAULT_PARTITIONS_AHEAD,
  ensurePartitions,
  isNoPartition,
  listPartitions,
  type PartitionArchive,
  type PartitionInfo,
  type PartitionRepository,
  type PartitionState,
} from './partitions.ts';
export {
  checkSchema,
  loadMigrations,
  migrate,
  MIGRATIONS_DIR,
  type MigrateResult,
  type Migration,
} from './migrate.ts';
export {
  createVaultPool,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_QUERY_TIMEOUT_MS,
  runtimeRoleProblems,
  VAULT_WRITER_ROLE,
  withTls,
  type PlanCacheMode,
  type VaultPoolOptions,
  type VaultTls,
} from './pool.ts';
export {
  DEFAULT_LIMIT,
  MAX_LIMIT,
  STREAM_BATCH,
  type AttestationFilter,
  type Page,
  type PageRequest,
  type StreamOptions,
} from './query.ts';
export { mirroredStatus, type RunRecord, type RunRepository } from './runs.ts';
export {
  RUN_LIST_DEFAULT_LIMIT,
  RUN_LIST_MAX_LIMIT,
  type RunListFilter,
  type RunListPage,
  type RunListRepository,
  type RunSummary,
} from './run-list.ts';
export {
  type NewSignerCertificate,
  type SignerCertificate,
  type SignerCertificateRepository,
} from './signer-certs.ts';
export {
  type EntryCopy,
  type LogHead,
  type NewLogEntry,
  type ScittLogAppend,
  type ScittLogStorage,
  type StoredLogEntry,
  type SubtreeHash,
  type SubtreeRef,
} from './scitt-log.ts';
export {
  TIMESTAMP_DUE_CHANNEL,
  type ClaimedTimestampJob,
  type TimestampJob,
  type TimestampJobState,
  type TimestampRepository,
} from './timestamps.ts';
export {
  DUE_CHANNEL,
  TRANSPARENCY_CHANNEL,
  type ClaimedJob,
  type ClaimOptions,
  type JobBackend,
  type JobState,
  type Publication,
  type RunJob,
  type TransparencyJob,
  type TransparencyJobRepository,
} from './transparency-jobs.ts';
export {
  type Cosignature,
  type RefusalOutcome,
  type StoredNote,
  type TlogName,
  type TlogRepository,
  type WitnessRecord,
  type WitnessRefusal,
} from './tlog.ts';
export * from './types.ts';
export { isUuidV7, uuidV7Time, UuidV7Generator } from './uuidv7.ts';

export interface Vault {
  readonly attestations: AttestationRepository;
  /** The mirror of each Run (spec and the pipeline's status), and the runs list. */
  readonly runs: RunRepository & RunListRepository;
  /** Artifact metadata records (the AIBOM's). */
  readonly artifacts: ArtifactRepository;
  /** Which records stand for a logical key; appends that claim one. */
  readonly claims: ClaimRepository;
  /** Capability chains and their tokens (written with the claims of step batches). */
  readonly capabilityGrants: CapabilityGrantRepository;
  /** The SCITT publication queue. */
  readonly transparencyJobs: TransparencyJobRepository;
  /** Rows of the service's own SCITT log (the log itself is src/transparency/local-log.ts). */
  readonly scittLog: ScittLogStorage;
  readonly audit: AuditRepository;
  /** The Merkle tree over the records and its signed checkpoints (src/checkpoint). */
  readonly checkpoints: CheckpointRepository;
  /** The C2SP signed-note checkpoints of both trees, their witnesses' cosignatures and refusals. */
  readonly tlog: TlogRepository;
  /** Every certificate chain or key that signed something, recorded on first use (key distribution). */
  readonly signers: SignerCertificateRepository;
  /** Requests to re-sign an artifact's C2PA manifest. */
  readonly manifestRepairs: ManifestRepairRepository;
  /** RFC 3161 time-stamps of the records' signatures, and their queue. */
  readonly timestamps: TimestampRepository;
  /** UI sessions ended by sign-out before their cookie expired (every replica refuses them). */
  readonly uiSessions: UiSessionRepository;
  /** What the vault found it lost after the database lost acknowledged writes (docs/failover.md). */
  readonly losses: LossRepository;
  /** The monthly partitions of the records: created ahead, archived and detached (retention). */
  readonly partitions: PartitionRepository;
  /**
   * A 32-byte key for `purpose`, the same on every replica: HKDF-SHA256 of the vault's shared
   * secret (the cursor key of migration 0001), so no replica needs a key of its own and purposes
   * never share a key (the UI's session cookies and CSRF tokens: src/http/ui/session.ts).
   */
  deriveKey(purpose: string): Buffer;
  /** The dedicated LISTEN connection, opened on first subscription. */
  readonly listener: VaultListener;
  /** Resolves when the database answers (readiness). */
  ping(): Promise<void>;
  /** What the login can do beyond the runtime role (empty when nothing): see runtimeRoleProblems. */
  runtimeRoleProblems(): Promise<string[]>;
  /** Closes the listener and the pool. */
  close(): Promise<void>;
}

export interface OpenVaultOptions {
  readonly cursorKey?: Uint8Array;
  /**
   * SERVICE_CAPABILITY_TOKENS: false leaves stored capability tokens out of every read (the
   * envelopes lose `capability_tokens`). Default true.
   */
  readonly capabilityTokens?: boolean;
  /** Failures of the LISTEN connection (it reconnects by itself). */
  readonly onListenerError?: (err: Error) => void;
}

/** Binds the repositories to a pool (see createVaultPool); loads the shared cursor key. */
export async function openVault(pool: pg.Pool, options: OpenVaultOptions = {}): Promise<Vault> {
  const secret = options.cursorKey ?? (await loadCursorKey(pool));
  const cursors = new CursorCodec(secret);
  let listener: VaultListener | undefined;
  const listenerOf = (): VaultListener =>
    (listener ??= createListener(pool.options, {
      ...(options.onListenerError !== undefined ? { onError: options.onListenerError } : {}),
    }));
  return {
    attestations: attestationRepository(pool, cursors, {
      ...(options.capabilityTokens !== undefined ? { capabilityTokens: options.capabilityTokens } : {}),
    }),
    runs: { ...runRepository(pool), ...runListRepository(pool, cursors) },
    artifacts: artifactRepository(pool),
    claims: claimRepository(pool),
    capabilityGrants: capabilityGrantRepository(pool),
    transparencyJobs: transparencyJobRepository(pool),
    scittLog: scittLogStorage(pool),
    audit: auditRepository(pool),
    checkpoints: checkpointRepository(pool),
    tlog: tlogRepository(pool),
    signers: signerCertificateRepository(pool),
    manifestRepairs: manifestRepairRepository(pool),
    timestamps: timestampRepository(pool),
    uiSessions: uiSessionRepository(pool),
    losses: lossRepository(pool),
    partitions: partitionRepository(pool),
    deriveKey: (purpose) => Buffer.from(hkdfSync('sha256', secret, 'aibom-vault/v1', purpose, 32)),
    get listener() {
      return listenerOf();
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    runtimeRoleProblems: () => runtimeRoleProblems(pool),
    async close() {
      await listener?.close();
      await pool.end();
    },
  };
}

/** Opens the runtime pool (role vault_writer) on `url` and the vault over it. */
export async function connectVault(
  url: string,
  options: VaultPoolOptions & OpenVaultOptions = {},
): Promise<Vault> {
  const { cursorKey, onListenerError, capabilityTokens, ...poolOptions } = options;
  const pool = createVaultPool(url, poolOptions);
  try {
    return await openVault(pool, {
      ...(cursorKey !== undefined ? { cursorKey } : {}),
      ...(onListenerError !== undefined ? { onListenerError } : {}),
      ...(capabilityTokens !== undefined ? { capabilityTokens } : {}),
    });
  } catch (err) {
    await pool.end();
    throw err;
  }
}

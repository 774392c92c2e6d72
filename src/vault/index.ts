import type pg from 'pg';
import { attestationRepository, type AttestationRepository } from './attestations.ts';
import { artifactRepository, type ArtifactRepository } from './artifacts.ts';
import { auditRepository, type AuditRepository } from './audit.ts';
import { claimRepository, type ClaimRepository } from './claims.ts';
import { CursorCodec, loadCursorKey } from './cursor.ts';
import { createListener, type VaultListener } from './listener.ts';
import { createVaultPool, type VaultPoolOptions } from './pool.ts';
import { runRepository, type RunRepository } from './runs.ts';
import { scittLogStorage, type ScittLogStorage } from './scitt-log.ts';
import { signerCertificateRepository, type SignerCertificateRepository } from './signers.ts';
import { transparencyJobRepository, type TransparencyJobRepository } from './transparency-jobs.ts';

/**
 * The vault: PostgreSQL, the system of record. It owns its pool; everything else reaches the
 * tables through the repositories below, each named for what it holds. Nothing outside src/vault
 * imports `pg` (eslint.config.js).
 */

export {
  type AttestationAppendOptions,
  type AttestationRepository,
  type AttestationSummary,
} from './attestations.ts';
export { type ArtifactRecord, type ArtifactRepository, type NewArtifact } from './artifacts.ts';
export { type AuditEntry, type AuditRecord, type AuditRepository } from './audit.ts';
export { type ChainBreak, type ChainReport, type VerifyChainOptions } from './chain.ts';
export { type ClaimedAppendOptions, type ClaimRepository } from './claims.ts';
export { CursorCodec, loadCursorKey } from './cursor.ts';
export {
  SQLSTATE_APPEND_ONLY,
  SQLSTATE_INSUFFICIENT_PRIVILEGE,
  VaultError,
  type VaultErrorCode,
} from './errors.ts';
export { type Subscription, type VaultListener } from './listener.ts';
export {
  checkSchema,
  loadMigrations,
  migrate,
  MIGRATIONS_DIR,
  type MigrateResult,
  type Migration,
} from './migrate.ts';
export { createVaultPool, VAULT_WRITER_ROLE, type VaultPoolOptions } from './pool.ts';
export {
  DEFAULT_LIMIT,
  MAX_LIMIT,
  STREAM_BATCH,
  type AttestationFilter,
  type Page,
  type PageRequest,
} from './query.ts';
export { mirroredStatus, type RunRecord, type RunRepository } from './runs.ts';
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
  type NewSignerCertificate,
  type SignerCertificate,
  type SignerCertificateRepository,
  type SignerScope,
} from './signers.ts';
export * from './types.ts';
export { isUuidV7, uuidV7Time, UuidV7Generator } from './uuidv7.ts';

export interface Vault {
  readonly attestations: AttestationRepository;
  /** The mirror of each Run (spec and the pipeline's status). */
  readonly runs: RunRepository;
  /** Artifact metadata records (the AIBOM's). */
  readonly artifacts: ArtifactRepository;
  /** Which records stand for a logical key; appends that claim one. */
  readonly claims: ClaimRepository;
  /** The SCITT publication queue. */
  readonly transparencyJobs: TransparencyJobRepository;
  /** Rows of the service's own SCITT log (the log itself is src/transparency/local-log.ts). */
  readonly scittLog: ScittLogStorage;
  readonly audit: AuditRepository;
  /** Every signing certificate records were signed with (what `cert_chain_ref` resolves to). */
  readonly signers: SignerCertificateRepository;
  /** The dedicated LISTEN connection, opened on first subscription. */
  readonly listener: VaultListener;
  /** Resolves when the database answers (readiness). */
  ping(): Promise<void>;
  /** Closes the listener and the pool. */
  close(): Promise<void>;
}

export interface OpenVaultOptions {
  readonly cursorKey?: Uint8Array;
  /** Failures of the LISTEN connection (it reconnects by itself). */
  readonly onListenerError?: (err: Error) => void;
}

/** Binds the repositories to a pool (see createVaultPool); loads the shared cursor key. */
export async function openVault(pool: pg.Pool, options: OpenVaultOptions = {}): Promise<Vault> {
  const cursors = new CursorCodec(options.cursorKey ?? (await loadCursorKey(pool)));
  let listener: VaultListener | undefined;
  const listenerOf = (): VaultListener =>
    (listener ??= createListener(pool.options, {
      ...(options.onListenerError !== undefined ? { onError: options.onListenerError } : {}),
    }));
  return {
    attestations: attestationRepository(pool, cursors),
    runs: runRepository(pool),
    artifacts: artifactRepository(pool),
    claims: claimRepository(pool),
    transparencyJobs: transparencyJobRepository(pool),
    scittLog: scittLogStorage(pool),
    audit: auditRepository(pool),
    signers: signerCertificateRepository(pool),
    get listener() {
      return listenerOf();
    },
    async ping() {
      await pool.query('SELECT 1');
    },
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
  const { cursorKey, onListenerError, ...poolOptions } = options;
  const pool = createVaultPool(url, poolOptions);
  try {
    return await openVault(pool, {
      ...(cursorKey !== undefined ? { cursorKey } : {}),
      ...(onListenerError !== undefined ? { onListenerError } : {}),
    });
  } catch (err) {
    await pool.end();
    throw err;
  }
}

import type pg from 'pg';
import { append, type AppendOptions } from './append.ts';
import { recordAudit, type AuditEntry, type AuditRecord } from './audit.ts';
import { verifyChain, type ChainReport, type VerifyChainOptions } from './chain.ts';
import { CursorCodec, loadCursorKey } from './cursor.ts';
import {
  getAttestation,
  getAttestations,
  queryAttestations,
  streamAttestations,
  type AttestationFilter,
  type Page,
  type PageRequest,
} from './query.ts';
import type { NewAttestation, StoredAttestation } from './types.ts';

export { append, type AppendOptions } from './append.ts';
export { recordAudit, type AuditEntry, type AuditRecord } from './audit.ts';
export { verifyChain, type ChainBreak, type ChainReport, type VerifyChainOptions } from './chain.ts';
export { CursorCodec, loadCursorKey } from './cursor.ts';
export {
  SQLSTATE_APPEND_ONLY,
  SQLSTATE_INSUFFICIENT_PRIVILEGE,
  VaultError,
  type VaultErrorCode,
} from './errors.ts';
export {
  checkSchema,
  loadMigrations,
  migrate,
  MIGRATIONS_DIR,
  type MigrateResult,
  type Migration,
} from './migrate.ts';
export { listNamespaces } from './namespaces.ts';
export { createVaultPool, VAULT_WRITER_ROLE, type VaultPoolOptions } from './pool.ts';
export {
  DEFAULT_LIMIT,
  getAttestation,
  MAX_LIMIT,
  queryAttestations,
  STREAM_BATCH,
  streamAttestations,
  type AttestationFilter,
  type Page,
  type PageRequest,
} from './query.ts';
export * from './types.ts';
export { isUuidV7, uuidV7Time, UuidV7Generator } from './uuidv7.ts';

/** The vault bound to one pool: what the controller and the HTTP routes receive. */
export interface Vault {
  readonly pool: pg.Pool;
  append(input: readonly NewAttestation[], options?: AppendOptions): Promise<StoredAttestation[]>;
  get(id: string, options?: { namespaces?: readonly string[] }): Promise<StoredAttestation | null>;
  /** Many records by id in one query, keyed by (lower-case) id; unknown ids are absent. */
  getMany(ids: readonly string[]): Promise<Map<string, StoredAttestation>>;
  query(filter: AttestationFilter, page?: PageRequest): Promise<Page>;
  stream(
    filter: AttestationFilter,
    options?: { batchSize?: number },
  ): AsyncGenerator<StoredAttestation, void, undefined>;
  verifyChain(options: VerifyChainOptions): Promise<ChainReport>;
  recordAudit(entry: AuditEntry): Promise<AuditRecord>;
}

/** Binds the vault operations to a pool (see createVaultPool); loads the shared cursor key. */
export async function openVault(pool: pg.Pool, options: { cursorKey?: Uint8Array } = {}): Promise<Vault> {
  const cursors = new CursorCodec(options.cursorKey ?? (await loadCursorKey(pool)));
  return {
    pool,
    append: (input, opts) => append(pool, input, opts),
    get: (id, opts) => getAttestation(pool, id, opts),
    getMany: (ids) => getAttestations(pool, ids),
    query: (filter, page) => queryAttestations(pool, cursors, filter, page),
    stream: (filter, opts) => streamAttestations(pool, filter, opts),
    verifyChain: (opts) => verifyChain(pool, opts),
    recordAudit: (entry) => recordAudit(pool, entry),
  };
}

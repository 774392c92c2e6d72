import { BaseError } from '../errors.ts';

/**
 * Stable error codes of the vault. Callers (HTTP error handler, CLI) switch on `code`, never on
 * the message.
 */
export type VaultErrorCode =
  /** A pagination cursor was forged, truncated, from another filter or from an unknown version. */
  | 'CURSOR_INVALID'
  /** A caller-supplied value (record field, filter, limit) is malformed. */
  | 'INVALID_INPUT'
  /** An applied migration's file changed since it was applied: refuse to start. */
  | 'MIGRATION_CHECKSUM_MISMATCH'
  /** The database lacks migrations this build needs, and this process may not apply them. */
  | 'MIGRATION_PENDING'
  /** The database holds a pending migration older than an applied one, or the files are malformed. */
  | 'MIGRATION_INVALID'
  /** A logical key (`step:<run>:<step>`, ...) is claimed already: the records were not stored again. */
  | 'CLAIM_TAKEN'
  /**
   * The runtime login can do more than the runtime role: it is a superuser, owns objects of the
   * vault or may become their owner (docs/vault.md "Roles").
   */
  | 'RUNTIME_ROLE_PRIVILEGED';

export class VaultError extends BaseError<VaultErrorCode> {}

/**
 * SQLSTATE raised by the append-only triggers (`restrict_violation`). A missing privilege is
 * `42501` (`insufficient_privilege`), raised before any trigger runs.
 */
export const SQLSTATE_APPEND_ONLY = '23001';
export const SQLSTATE_INSUFFICIENT_PRIVILEGE = '42501';

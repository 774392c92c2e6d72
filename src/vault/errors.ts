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

/** Node socket errors of a server that is down, unreachable or went away. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of an unavailable server rather than a bad request: class 08 (connection exception),
 * 53300 too_many_connections, 57014 query_canceled (statement_timeout, pool.ts), 57P01–57P03
 * (shutdown, crash, cannot connect now), 55P03 lock_not_available.
 */
const UNAVAILABLE_SQLSTATE = /^(08...|53300|57014|57P0[123]|55P03)$/;

/**
 * The errors node-postgres raises without a code when a server does not answer or the socket
 * dies: its client-side query deadline, its connect deadline (pool and client), a terminated
 * connection. node-postgres gives these no code, so this one place names its messages.
 */
const DRIVER_MESSAGES =
  /^(Query read timeout|timeout exceeded when trying to connect|timeout expired|Connection terminated|Client has encountered a connection error and is not queryable|Client was closed and is not queryable)/;

/**
 * True when `err` (or its cause) says PostgreSQL is down, hung or unreachable, not that the
 * request was wrong: the API answers 503 UPSTREAM_UNAVAILABLE for these, and the controller shows
 * VaultUnavailable.
 */
export function isVaultUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
    if (DRIVER_MESSAGES.test(e.message)) return true;
  }
  return false;
}

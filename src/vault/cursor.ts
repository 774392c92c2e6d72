import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { VaultError } from './errors.ts';

/**
 * Opaque pagination cursors: `base64url(JSON {v:1, after, f}) "." base64url(HMAC-SHA256[0..16])`.
 *
 * `after` is the last id of the page; `f` fingerprints the filter the cursor was issued for, so a
 * cursor replayed with another filter is rejected as stale. The MAC key lives in the database
 * (`vault_cursor_key`), so every replica accepts every replica's cursors and restarts do not break
 * pagination. Authorization never depends on the cursor: the namespace filter is re-applied on every
 * page, so a forged cursor could only move the starting point, and the MAC rejects even that.
 */
export class CursorCodec {
  readonly #key: Buffer;

  constructor(key: Uint8Array) {
    if (key.length < 32) throw new TypeError('cursor key must be at least 32 bytes');
    this.#key = Buffer.from(key);
  }

  encode(after: string, fingerprint: string): string {
    const body = Buffer.from(JSON.stringify({ v: 1, after, f: fingerprint })).toString('base64url');
    return `${body}.${this.#mac(body).toString('base64url')}`;
  }

  /**
   * Returns the `after` key, or throws CURSOR_INVALID. `after` must match `key` (default: a UUID,
   * the id of the page's last record).
   */
  decode(cursor: string, fingerprint: string, key: RegExp = UUID): string {
    const invalid = (why: string): never => {
      throw new VaultError('CURSOR_INVALID', `invalid cursor: ${why}`);
    };
    const dot = cursor.indexOf('.');
    if (dot <= 0 || cursor.length > 512) return invalid('malformed');
    const body = cursor.slice(0, dot);
    const mac = Buffer.from(cursor.slice(dot + 1), 'base64url');
    const expected = this.#mac(body);
    if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return invalid('bad signature');
    let payload: unknown;
    try {
      payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch (cause) {
      throw new VaultError('CURSOR_INVALID', 'invalid cursor: malformed', { cause });
    }
    const p = payload as { v?: unknown; after?: unknown; f?: unknown } | null;
    if (p === null || typeof p !== 'object' || p.v !== 1) return invalid('unknown version');
    if (p.f !== fingerprint) return invalid('issued for another filter');
    if (typeof p.after !== 'string' || !key.test(p.after)) return invalid('malformed');
    return p.after;
  }

  #mac(body: string): Buffer {
    return createHmac('sha256', this.#key).update(body).digest().subarray(0, 16);
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Reads the shared cursor key created by migration 0001. */
export async function loadCursorKey(pool: pg.Pool): Promise<Buffer> {
  const { rows } = await pool.query<{ key: Buffer }>('SELECT key FROM vault_cursor_key');
  const key = rows[0]?.key;
  // Invariant, not a caller's error: the migrations create this row (a plain Error, issue 23).
  if (key === undefined)
    throw new VaultError('MIGRATION_PENDING', 'vault_cursor_key is empty: was migration 0001 applied?');
  return key;
}

/** Short, stable fingerprint of a JSON-able value (the normalised filter). */
export function fingerprint(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64url').slice(0, 16);
}

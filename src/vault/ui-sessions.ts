import type pg from 'pg';

/**
 * `ui_session_revocations` (migration 0018): the UI sessions signed out before their cookie
 * expired, seen by every replica. Rows outlive their session by minutes only (pruned on revoke).
 */
export interface UiSessionRepository {
  /** Records that the session `sid` ended; `expiresAt` is when its cookie would have. Idempotent. */
  revoke(sid: string, expiresAt: Date): Promise<void>;
  /** Whether the session `sid` was signed out. */
  isRevoked(sid: string): Promise<boolean>;
}

export function uiSessionRepository(pool: pg.Pool): UiSessionRepository {
  return {
    async revoke(sid, expiresAt) {
      await pool.query({
        name: 'vault_ui_session_revoke',
        text: 'SELECT ui_session_revoke($1::text, $2::timestamptz)',
        values: [sid, expiresAt],
      });
    },
    async isRevoked(sid) {
      const { rows } = await pool.query<{ revoked: boolean }>({
        name: 'vault_ui_session_revoked',
        text: 'SELECT EXISTS (SELECT 1 FROM ui_session_revocations WHERE sid = $1::text) AS revoked',
        values: [sid],
      });
      return rows[0]?.revoked === true;
    },
  };
}

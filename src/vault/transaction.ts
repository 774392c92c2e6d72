import type pg from 'pg';
import { isVaultUnavailable } from './errors.ts';

/**
 * Runs `fn` in one transaction on one pooled connection: COMMIT when it resolves, ROLLBACK when it
 * throws. A server that stopped answering would make the ROLLBACK wait out another deadline, so a
 * connection that failed as unavailable is dropped instead (the server rolls back a transaction
 * whose session ends), and so is one whose ROLLBACK failed.
 *
 * While the connection is checked out, its `error` event has a listener: a connection that dies
 * between two statements of the transaction (the server killed, a failover moving the address)
 * emits it with no query waiting, and an unheard `error` event would end the process. The next
 * statement fails then anyway; the connection is discarded.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let discard: Error | undefined;
  const lost = (err: Error): void => {
    discard = err;
  };
  client.on('error', lost);
  try {
    await client.query('BEGIN');
    try {
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      if (isVaultUnavailable(err)) discard = err as Error;
      else
        await client.query('ROLLBACK').catch((e: unknown) => {
          discard = e instanceof Error ? e : new Error(String(e));
        });
      throw err;
    }
  } finally {
    client.off('error', lost);
    client.release(discard);
  }
}

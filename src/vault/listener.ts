import pg from 'pg';

/**
 * The vault's dedicated LISTEN connection: PostgreSQL notifications (sent by triggers in the
 * transaction of a change, delivered on commit) reach every process, so a job enqueued or published
 * in one replica wakes the workers and the projection in all of them.
 *
 * Notifications sent while this connection is down are lost, so after every (re)connect each
 * subscriber's `resync` runs: it re-reads what it may have missed. A connection that dies silently
 * (half-open TCP behind a NAT) is found by a heartbeat query and replaced, with the same resync.
 */

export interface Subscription {
  /** A notification on the channel, with its payload. */
  readonly onNotify: (payload: string) => void;
  /** After the connection is (re)established and listening: re-read whatever changed meanwhile. */
  readonly resync: () => void;
}

export interface VaultListener {
  /**
   * Subscribes to `channel`. Resolves after the first attempt to listen (then `resync` has run once);
   * when the database is unreachable it keeps retrying, and `resync` runs once it listens.
   * Returns the unsubscribe.
   */
  subscribe(channel: string, subscription: Subscription): Promise<() => void>;
  /** True while the connection is up and listening. */
  connected(): boolean;
  close(): Promise<void>;
}

export interface ListenerOptions {
  /** Between heartbeats (default 30 s). */
  readonly heartbeatMs?: number;
  /** First reconnect delay, doubling to `maxBackoffMs` (default 250 ms → 30 s). */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly onError?: (err: Error) => void;
}

const quoteIdent = (name: string): string => {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new TypeError(`invalid channel name ${name}`);
  return `"${name}"`;
};

/** A listener over connections made with `config` (the runtime pool's: same role and options). */
export function createListener(config: pg.ClientConfig, options: ListenerOptions = {}): VaultListener {
  const heartbeatMs = options.heartbeatMs ?? 30_000;
  const minBackoff = options.minBackoffMs ?? 250;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const channels = new Map<string, Set<Subscription>>();
  let client: pg.Client | undefined;
  let listening = false;
  let closed = false;
  let backoff = minBackoff;
  let heartbeat: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let connecting: Promise<void> | undefined;

  const resyncAll = (subs: Iterable<Subscription>): void => {
    for (const s of subs) {
      try {
        s.resync();
      } catch (err) {
        options.onError?.(err as Error);
      }
    }
  };

  const drop = (err?: Error): void => {
    if (err) options.onError?.(err);
    const c = client;
    client = undefined;
    listening = false;
    clearInterval(heartbeat);
    heartbeat = undefined;
    if (c) {
      c.removeAllListeners('notification');
      c.on('error', () => undefined);
      void c.end().catch(() => undefined);
    }
    if (!closed && retry === undefined && channels.size > 0) {
      retry = setTimeout(() => {
        retry = undefined;
        void connect();
      }, backoff);
      retry.unref();
      backoff = Math.min(maxBackoff, backoff * 2);
    }
  };

  const connect = (): Promise<void> => {
    connecting ??= (async () => {
      const c = new pg.Client({ ...config, keepAlive: true });
      c.on('error', (err) => {
        if (client === c) drop(err);
      });
      c.on('end', () => {
        if (client === c) drop(new Error('the vault LISTEN connection ended'));
      });
      c.on('notification', (n) => {
        for (const s of channels.get(n.channel) ?? []) {
          try {
            s.onNotify(n.payload ?? '');
          } catch (err) {
            options.onError?.(err as Error);
          }
        }
      });
      try {
        await c.connect();
        client = c;
        for (const channel of channels.keys()) await c.query(`LISTEN ${quoteIdent(channel)}`);
        listening = true;
        backoff = minBackoff;
        heartbeat = setInterval(() => {
          c.query('SELECT 1').catch((err: unknown) => {
            if (client === c) drop(err as Error);
          });
        }, heartbeatMs);
        heartbeat.unref();
      } catch (err) {
        client = c;
        drop(err as Error);
        return;
      } finally {
        connecting = undefined;
      }
      // Listening on every channel: whatever was sent before this point is read again.
      resyncAll([...channels.values()].flatMap((s) => [...s]));
    })();
    return connecting;
  };

  return {
    async subscribe(channel, subscription) {
      quoteIdent(channel);
      const name = channel;
      let subs = channels.get(name);
      const fresh = subs === undefined;
      if (subs === undefined) {
        subs = new Set();
        channels.set(name, subs);
      }
      subs.add(subscription);
      if (client === undefined) {
        await connect();
      } else if (fresh && listening) {
        await client.query(`LISTEN ${quoteIdent(name)}`).catch((err: unknown) => drop(err as Error));
        resyncAll([subscription]);
      } else {
        resyncAll([subscription]);
      }
      return () => {
        subs.delete(subscription);
      };
    },
    connected: () => listening,
    async close() {
      closed = true;
      clearTimeout(retry);
      retry = undefined;
      await connecting;
      const c = client;
      client = undefined;
      listening = false;
      clearInterval(heartbeat);
      if (c) {
        c.on('error', () => undefined);
        await c.end().catch(() => undefined);
      }
    },
  };
}

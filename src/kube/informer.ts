import type { Registry } from 'prom-client';
import type { Logger } from '../log/index.ts';
import { BaseError } from '../errors.ts';
import { KubeApiError, isGone } from './client.ts';
import type { KubeObject, ListerWatcher, WatchEvent } from './listwatch.ts';
import { informerMetrics } from '../metrics/runtime.ts';
import { sleep } from '../queue/sleep.ts';

/** `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(obj: KubeObject): string {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

export function splitKey(key: string): { namespace: string | undefined; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: undefined, name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/**
 * Where an event comes from: `watch` is a change just seen; `list` is the initial list, a relist
 * after 410 Gone or the replay of the cache to a handler added late; `resync` the periodic replay.
 * A controller restarting into a large cluster queues `list`/`resync` work behind `watch` work.
 */
export type EventSource = 'list' | 'watch' | 'resync';

/**
 * Handlers run synchronously on the informer's loop: keep them cheap (enqueue a key) and do the work
 * in workers. A handler that throws is logged and does not affect the cache or other handlers.
 */
export interface EventHandler<T> {
  onAdd?(obj: T, source: EventSource): void;
  /** Also called with `oldObj === newObj` on periodic resync. */
  onUpdate?(oldObj: T, newObj: T, source: EventSource): void;
  /** After a relist the object is the last state the cache saw (the real final state is unknown). */
  onDelete?(obj: T, source: EventSource): void;
}

export interface InformerOptions<T> {
  /** Label of logs and metrics (`informer_*{informer}`), e.g. `runs`. */
  name: string;
  listerWatcher: ListerWatcher<T>;
  logger: Logger;
  registry?: Registry;
  /**
   * If neither an event nor a bookmark arrives for this long, the watch is presumed dead (a
   * half-open TCP connection, or client-node issues #364/#596) and restarted from the last
   * resourceVersion. Default 90 s.
   */
  watchdogSeconds?: number;
  /**
   * Server-side `timeoutSeconds` of each watch; must be below the watchdog so a healthy watch is
   * always ended (and bookmarked 2 s before) by the server first. Default 60 s.
   */
  watchTimeoutSeconds?: number;
  /** Every this often all cached objects are replayed to `onUpdate`; 0 disables. Default 10 min. */
  resyncSeconds?: number;
  /** Backoff after failed lists and watches: initial and cap in ms (default 800 ms → 30 s). */
  backoff?: { initialMs?: number; maxMs?: number };
}

type RestartReason = 'closed' | 'watchdog' | 'error' | 'expired';

/** Raised on the watch's own signal when the watchdog fires; never escapes the informer. */
class WatchdogTimeout extends BaseError<'WATCHDOG_TIMEOUT'> {
  constructor() {
    super('WATCHDOG_TIMEOUT', 'no watch event within the watchdog interval');
  }
}

/**
 * A list+watch cache with a watchdog (see docs/adr/0002-controller-runtime.md).
 *
 * Invariants:
 * - `#resourceVersion` is the version of the newest change (or bookmark) reflected in the cache; a
 *   restarted watch resumes from it, so changes made while the watch was down are replayed, not lost.
 * - The cache is only replaced by a complete list. After 410 Gone the informer relists and diffs:
 *   objects missing from the list get a synthesized delete, changed ones an update, new ones an add.
 * - `hasSynced()` turns true after the first complete list has been delivered to the handlers and
 *   stays true (later relists do not make the cache "unsynced", they repair it).
 * - Errors never end the loop: only `stop()` does.
 */
export class Informer<T extends KubeObject> {
  readonly name: string;
  readonly #lw: ListerWatcher<T>;
  readonly #log: Logger;
  readonly #metrics: ReturnType<typeof informerMetrics> | undefined;
  readonly #watchdogMs: number;
  readonly #watchTimeoutSeconds: number;
  readonly #resyncMs: number;
  readonly #backoffInitialMs: number;
  readonly #backoffMaxMs: number;
  readonly #handlers = new Set<EventHandler<T>>();
  #cache = new Map<string, T>();
  #resourceVersion = '';
  #synced = false;
  #syncWaiters: Array<() => void> = [];
  #abort: AbortController | undefined;
  #loop: Promise<void> | undefined;
  #resyncTimer: ReturnType<typeof setInterval> | undefined;

  constructor(options: InformerOptions<T>) {
    this.name = options.name;
    this.#lw = options.listerWatcher;
    this.#log = options.logger.child({ informer: options.name });
    this.#metrics = options.registry ? informerMetrics(options.registry) : undefined;
    const watchdog = options.watchdogSeconds ?? 90;
    const timeout = options.watchTimeoutSeconds ?? 60;
    if (!(Number.isInteger(timeout) && timeout >= 1))
      throw new RangeError('watchTimeoutSeconds: integer >= 1');
    if (!(watchdog > timeout)) throw new RangeError('watchdogSeconds must exceed watchTimeoutSeconds');
    this.#watchdogMs = watchdog * 1000;
    this.#watchTimeoutSeconds = timeout;
    this.#resyncMs = (options.resyncSeconds ?? 600) * 1000;
    this.#backoffInitialMs = options.backoff?.initialMs ?? 800;
    this.#backoffMaxMs = options.backoff?.maxMs ?? 30_000;
  }

  /** Registers handlers; if already synced, the new handler first gets `onAdd` for every cached object. */
  addHandler(handler: EventHandler<T>): () => void {
    this.#handlers.add(handler);
    if (this.#synced) for (const obj of this.#cache.values()) this.#call(handler, 'list', 'onAdd', obj);
    return () => this.#handlers.delete(handler);
  }

  /** Starts the list+watch loop (idempotent). An informer runs once: after `stop()`, make a new one. */
  start(): void {
    if (this.#loop) return;
    const abort = new AbortController();
    this.#abort = abort;
    this.#loop = this.#run(abort.signal);
    if (this.#resyncMs > 0) this.#resyncTimer = setInterval(() => this.#resync(), this.#resyncMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#resyncTimer);
    this.#abort?.abort(new Error('informer stopped'));
    await this.#loop;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal?.reason as Error);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#syncWaiters.push(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  get(key: string): T | undefined {
    return this.#cache.get(key);
  }

  list(): T[] {
    return [...this.#cache.values()];
  }

  keys(): string[] {
    return [...this.#cache.keys()];
  }

  /** The resourceVersion the next watch would start from. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  async #run(signal: AbortSignal): Promise<void> {
    let needList = true;
    let failures = 0;
    while (!signal.aborted) {
      let reason: RestartReason;
      let delay = 0;
      try {
        if (needList) {
          await this.#relist(signal);
          needList = false;
        }
        const started = performance.now();
        const { outcome, events } = await this.#watchOnce(signal);
        reason = outcome;
        // A server that closes watches at once would otherwise make this a tight loop.
        const useless = outcome === 'closed' && events === 0 && performance.now() - started < 1000;
        failures = useless ? failures + 1 : 0;
        if (useless) delay = this.#backoff(failures);
      } catch (err) {
        if (signal.aborted) break;
        failures++;
        if (isGone(err)) {
          // The resourceVersion fell out of the server's window: only a fresh list can repair the cache.
          reason = 'expired';
          needList = true;
          if (failures > 1) delay = this.#backoff(failures - 1);
        } else {
          reason = 'error';
          delay = this.#backoff(failures, err);
        }
        this.#log.warn(
          { err, resourceVersion: this.#resourceVersion, retryInMs: delay },
          'list/watch failed',
        );
      }
      this.#metrics?.restarts.inc({ informer: this.name, reason });
      if (reason === 'watchdog') {
        this.#log.warn(
          { resourceVersion: this.#resourceVersion },
          'watch silent past the watchdog; restarting',
        );
      }
      if (delay > 0) await sleep(delay, signal);
    }
  }

  #backoff(failures: number, err?: unknown): number {
    const exp = Math.min(this.#backoffMaxMs, this.#backoffInitialMs * 2 ** Math.min(failures - 1, 30));
    const jittered = exp * (0.8 + Math.random() * 0.4);
    const retryAfter = err instanceof KubeApiError ? (err.retryAfterSeconds ?? 0) * 1000 : 0;
    return Math.max(jittered, retryAfter);
  }

  async #relist(signal: AbortSignal): Promise<void> {
    const { items, resourceVersion } = await this.#lw.list(signal);
    if (signal.aborted) return;
    this.#metrics?.relists.inc({ informer: this.name });
    const next = new Map<string, T>();
    for (const item of items) next.set(objectKey(item), item);
    const previous = this.#cache;
    this.#cache = next;
    this.#resourceVersion = resourceVersion;
    for (const [key, old] of previous) if (!next.has(key)) this.#emit('list', 'onDelete', old);
    for (const [key, obj] of next) {
      const old = previous.get(key);
      if (old === undefined) this.#emit('list', 'onAdd', obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
        this.#emit('list', 'onUpdate', old, obj);
    }
    this.#log.debug({ items: items.length, resourceVersion }, 'listed');
    if (!this.#synced) {
      this.#synced = true;
      this.#metrics?.synced.set({ informer: this.name }, 1);
      for (const w of this.#syncWaiters.splice(0)) w();
    }
  }

  /** One watch connection, from `#resourceVersion`, until the server closes it, it fails, or the watchdog fires. */
  async #watchOnce(signal: AbortSignal): Promise<{ outcome: 'closed' | 'watchdog'; events: number }> {
    const local = new AbortController();
    const both = AbortSignal.any([signal, local.signal]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => local.abort(new WatchdogTimeout()), this.#watchdogMs);
    };
    let failed: KubeApiError | undefined;
    let events = 0;
    const onEvent = (ev: WatchEvent<T>): void => {
      if (both.aborted) return; // a late event from a connection we already gave up on
      arm();
      events++;
      this.#metrics?.events.inc({ informer: this.name, type: ev.type });
      if (ev.type === 'ERROR') {
        failed = new KubeApiError(ev.object.code ?? 500, ev.object);
        local.abort(failed);
      } else if (ev.type === 'BOOKMARK') {
        this.#resourceVersion = ev.object.metadata?.resourceVersion ?? this.#resourceVersion;
      } else {
        this.#apply(ev.type, ev.object);
      }
    };
    arm();
    try {
      await this.#lw.watch(
        { resourceVersion: this.#resourceVersion, timeoutSeconds: this.#watchTimeoutSeconds, signal: both },
        onEvent,
      );
      if (failed) throw failed;
      return { outcome: 'closed', events };
    } catch (err) {
      if (failed) throw failed;
      if (!signal.aborted && local.signal.reason instanceof WatchdogTimeout)
        return { outcome: 'watchdog', events };
      throw err;
    } finally {
      clearTimeout(timer);
      local.abort(); // whatever ended this watch, its connection must not linger
    }
  }

  #apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: T): void {
    const key = objectKey(obj);
    const old = this.#cache.get(key);
    if (type === 'DELETED') {
      this.#cache.delete(key);
      this.#emit('watch', 'onDelete', obj);
    } else {
      this.#cache.set(key, obj);
      if (old === undefined) this.#emit('watch', 'onAdd', obj);
      else this.#emit('watch', 'onUpdate', old, obj);
    }
    this.#resourceVersion = obj.metadata?.resourceVersion ?? this.#resourceVersion;
  }

  #resync(): void {
    if (!this.#synced) return;
    for (const obj of this.#cache.values()) this.#emit('resync', 'onUpdate', obj, obj);
  }

  #emit(source: EventSource, kind: 'onAdd' | 'onDelete', obj: T): void;
  #emit(source: EventSource, kind: 'onUpdate', oldObj: T, newObj: T): void;
  #emit(source: EventSource, kind: keyof EventHandler<T>, a: T, b?: T): void {
    for (const h of this.#handlers) this.#call(h, source, kind, a, b);
  }

  #call(h: EventHandler<T>, source: EventSource, kind: keyof EventHandler<T>, a: T, b?: T): void {
    try {
      if (kind === 'onUpdate') h.onUpdate?.(a, b ?? a, source);
      else h[kind]?.(a, source);
    } catch (err) {
      this.#log.error({ err, handler: kind, key: objectKey(a) }, 'event handler threw');
    }
  }
}

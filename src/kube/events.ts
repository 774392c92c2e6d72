import { randomBytes } from 'node:crypto';
import type { Logger } from '../log/index.ts';
import { isNotFound, microTime, type KubeClient } from './client.ts';

export type EventType = 'Normal' | 'Warning';

/** The object an Event is about. `uid` makes `kubectl describe` match it reliably. */
export interface InvolvedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  client: KubeClient;
  /** `reportingController`, e.g. `vault.service.dev/controller`. */
  reportingController: string;
  /** `reportingInstance`: this process (pod name). */
  reportingInstance: string;
  logger: Logger;
  fieldManager?: string;
  /** Repeats of one event within this window cost at most one API write (series update). Default 30 s. */
  seriesIntervalMs?: number;
  /** A repeat after this long starts a new Event object instead of extending the series. Default 10 min. */
  ttlMs?: number;
  /** Bound of the dedupe cache (oldest entries are dropped first). Default 4096. */
  maxEntries?: number;
}

interface Entry {
  namespace: string;
  name: string;
  /** Occurrences seen by this process; `written` of them are reflected on the server. */
  count: number;
  written: number;
  lastObserved: Date;
  lastWriteAt: number;
  /** The create (then the latest write) of this Event; writes are chained on it, never concurrent. */
  chain: Promise<boolean>;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Records `events.k8s.io/v1` Events (what `kubectl describe` and `kubectl get events` show).
 *
 * Dedupe: one Event object per (object, type, reason, action, note) and process. The first occurrence
 * creates it; repeats only count in memory, and the count is written as `series` at most once per
 * `seriesIntervalMs` (a trailing write so the final count is never lost). A reconcile hot loop thus
 * costs one create and then one patch per interval, not one write per iteration.
 * Recording is best effort: `event()` never rejects and never throws, failures are logged.
 */
export class EventRecorder {
  readonly #o: EventRecorderOptions;
  readonly #seriesMs: number;
  readonly #ttlMs: number;
  readonly #max: number;
  readonly #entries = new Map<string, Entry>();

  constructor(options: EventRecorderOptions) {
    this.#o = options;
    this.#seriesMs = options.seriesIntervalMs ?? 30_000;
    this.#ttlMs = options.ttlMs ?? 600_000;
    this.#max = options.maxEntries ?? 4096;
  }

  /** Resolves once the create is done (first occurrence) or at once (a repeat, written later). */
  event(obj: InvolvedObject, type: EventType, reason: string, note: string, action = reason): Promise<void> {
    try {
      const now = new Date();
      const regarding = {
        apiVersion: obj.apiVersion ?? '',
        kind: obj.kind ?? '',
        name: obj.metadata?.name ?? '',
        ...(obj.metadata?.namespace ? { namespace: obj.metadata.namespace } : {}),
        ...(obj.metadata?.uid ? { uid: obj.metadata.uid } : {}),
        ...(obj.metadata?.resourceVersion ? { resourceVersion: obj.metadata.resourceVersion } : {}),
      };
      const key = JSON.stringify([
        obj.metadata?.uid ?? `${regarding.namespace ?? ''}/${regarding.name}/${regarding.kind}`,
        type,
        reason,
        action,
        note,
      ]);
      const existing = this.#entries.get(key);
      if (existing !== undefined && now.getTime() - existing.lastObserved.getTime() <= this.#ttlMs) {
        existing.count++;
        existing.lastObserved = now;
        this.#scheduleSeries(existing);
        return Promise.resolve();
      }
      if (existing !== undefined) this.#retire(key, existing);
      return this.#create(key, regarding, type, reason, note, action, now);
    } catch (err) {
      this.#o.logger.warn({ err, reason }, 'event not recorded');
      return Promise.resolve();
    }
  }

  /** Writes every pending series count now (tests, shutdown). */
  async flush(): Promise<void> {
    await Promise.all(
      [...this.#entries.values()].map((e) => {
        clearTimeout(e.timer);
        e.timer = undefined;
        return this.#writeSeries(e);
      }),
    );
  }

  /** Flushes and forgets everything. */
  async close(): Promise<void> {
    await this.flush();
    this.#entries.clear();
  }

  #create(
    key: string,
    regarding: { name: string; namespace?: string },
    type: EventType,
    reason: string,
    note: string,
    action: string,
    now: Date,
  ): Promise<void> {
    const namespace = regarding.namespace ?? 'default'; // where Kubernetes puts events of cluster-scoped objects
    // client-go names events `<object>.<hex time>`; a random suffix avoids clashes within one ms.
    const name = `${regarding.name.slice(0, 200)}.${now.getTime().toString(16)}${randomBytes(4).toString('hex')}`;
    const entry: Entry = {
      namespace,
      name,
      count: 1,
      written: 1,
      lastObserved: now,
      lastWriteAt: now.getTime(),
      chain: Promise.resolve(false),
      timer: undefined,
    };
    if (this.#entries.size >= this.#max) {
      const [oldestKey, oldest] = this.#entries.entries().next().value ?? [];
      if (oldestKey !== undefined && oldest !== undefined) this.#retire(oldestKey, oldest);
    }
    this.#entries.set(key, entry);
    entry.chain = this.#o.client
      .request({
        method: 'POST',
        path: `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
        query: { fieldManager: this.#o.fieldManager },
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name, namespace },
          eventTime: microTime(now),
          reportingController: this.#o.reportingController,
          reportingInstance: this.#o.reportingInstance.slice(0, 128),
          action: action.slice(0, 128),
          reason: reason.slice(0, 128),
          note: truncateBytes(note, 1024),
          type,
          regarding,
        },
      })
      .then(
        () => true,
        (err: unknown) => {
          // Forget it so the next occurrence tries a fresh create rather than patching nothing.
          if (this.#entries.get(key) === entry) this.#drop(key, entry);
          this.#o.logger.warn({ err, reason, object: regarding }, 'event not recorded');
          return false;
        },
      );
    return entry.chain.then(() => undefined);
  }

  #scheduleSeries(e: Entry): void {
    if (e.timer !== undefined) return;
    const wait = Math.max(0, e.lastWriteAt + this.#seriesMs - Date.now());
    e.timer = setTimeout(() => {
      e.timer = undefined;
      void this.#writeSeries(e);
    }, wait);
    e.timer.unref(); // a pending count must not keep the process alive; close() flushes it
  }

  #writeSeries(e: Entry): Promise<boolean> {
    e.chain = e.chain.then(async (created) => {
      if (!created || e.count <= e.written) return created;
      const count = e.count;
      try {
        await this.#o.client.request({
          method: 'PATCH',
          path: `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(e.namespace)}/events/${encodeURIComponent(e.name)}`,
          query: { fieldManager: this.#o.fieldManager },
          contentType: 'application/merge-patch+json',
          body: { series: { count, lastObservedTime: microTime(e.lastObserved) } },
        });
        e.written = count;
        e.lastWriteAt = Date.now();
        return true;
      } catch (err) {
        // 404: the server's event TTL removed it; the next occurrence creates a new one.
        if (isNotFound(err)) {
          for (const [k, v] of this.#entries) if (v === e) this.#drop(k, e);
          return false;
        }
        this.#o.logger.warn({ err, event: e.name }, 'event series not updated');
        return true;
      }
    });
    return e.chain;
  }

  /** Leaves the cache; a count not yet on the server is still written. */
  #retire(key: string, e: Entry): void {
    this.#drop(key, e);
    void this.#writeSeries(e);
  }

  #drop(key: string, e: Entry): void {
    clearTimeout(e.timer);
    e.timer = undefined;
    this.#entries.delete(key);
  }
}

export function eventRecorder(options: EventRecorderOptions): EventRecorder {
  return new EventRecorder(options);
}

function truncateBytes(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = Buffer.from(s)
    .subarray(0, max - 3)
    .toString('utf8');
  // A cut inside a multi-byte character decodes to U+FFFD: drop it.
  out = out.replace(/\uFFFD$/, '');
  return `${out}...`;
}

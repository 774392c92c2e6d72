import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Informer, objectKey, splitKey } from '../../../src/kube/informer.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { ListResult, ListerWatcher, WatchEvent, WatchOptions } from '../../../src/kube/listwatch.ts';

const logger = pino({ level: 'silent' });

interface Obj {
  metadata: { name: string; namespace?: string; resourceVersion: string };
  data?: string;
}

const obj = (name: string, rv: number, data?: string): Obj => ({
  metadata: { name, namespace: 'ns', resourceVersion: String(rv) },
  ...(data !== undefined ? { data } : {}),
});

interface WatchCall extends WatchOptions {
  emit(e: WatchEvent<Obj>): void;
  /** Server closes the stream cleanly. */
  end(): void;
  fail(err: unknown): void;
}

/** A scripted API server: `lists` answers list calls in order; watches are driven by the test. */
class FakeLW implements ListerWatcher<Obj> {
  lists: Array<ListResult<Obj> | Error> = [];
  listCalls = 0;
  watches: WatchCall[] = [];

  list(): Promise<ListResult<Obj>> {
    const next = this.lists[Math.min(this.listCalls, this.lists.length - 1)];
    this.listCalls++;
    if (next === undefined) return Promise.reject(new Error('no list scripted'));
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(structuredClone(next));
  }

  watch(options: WatchOptions, onEvent: (e: WatchEvent<Obj>) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      // Like a real connection: abort ends it with the signal's reason.
      options.signal.addEventListener('abort', () => reject(options.signal.reason as Error), { once: true });
      this.watches.push({ ...options, emit: onEvent, end: resolve, fail: reject });
    });
  }

  get current(): WatchCall {
    const w = this.watches.at(-1);
    if (!w) throw new Error('no watch open');
    return w;
  }
}

function recorder() {
  const events: string[] = [];
  return {
    events,
    handler: {
      onAdd: (o: Obj) => events.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`),
      onUpdate: (a: Obj, b: Obj) =>
        events.push(`update ${b.metadata.name}@${a.metadata.resourceVersion}->${b.metadata.resourceVersion}`),
      onDelete: (o: Obj) => events.push(`delete ${o.metadata.name}@${o.metadata.resourceVersion}`),
    },
  };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) {
    if (vi.isFakeTimers()) await vi.advanceTimersByTimeAsync(0);
    else await new Promise((r) => setTimeout(r, 1));
  }
  if (!cond()) throw new Error('condition not met');
}

function metric(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

let informer: Informer<Obj> | undefined;
afterEach(async () => {
  await informer?.stop();
  informer = undefined;
  vi.useRealTimers();
  vi.restoreAllMocks();
});

function make(lw: FakeLW, extra: Partial<ConstructorParameters<typeof Informer<Obj>>[0]> = {}) {
  const registry = new Registry();
  informer = new Informer<Obj>({
    name: 'things',
    listerWatcher: lw,
    logger,
    registry,
    watchdogSeconds: 10,
    watchTimeoutSeconds: 5,
    resyncSeconds: 0,
    backoff: { initialMs: 100, maxMs: 1000 },
    ...extra,
  });
  return { informer, registry };
}

describe('keys', () => {
  it('namespace/name, or name for cluster-scoped objects', () => {
    expect(objectKey(obj('a', 1))).toBe('ns/a');
    expect(objectKey({ metadata: { name: 'node1' } })).toBe('node1');
    expect(splitKey('ns/a')).toEqual({ namespace: 'ns', name: 'a' });
    expect(splitKey('node1')).toEqual({ namespace: undefined, name: 'node1' });
  });
});

describe('Informer with a fake list/watch', () => {
  it('lists, syncs, then applies watch events from the list resourceVersion', async () => {
    vi.useFakeTimers();
    const lw = new FakeLW();
    lw.lists = [{ items: [obj('a', 1), obj('b', 2)], resourceVersion: '10' }];
    const { informer: inf } = make(lw);
    const rec = recorder();
    inf.addHandler(rec.handler);
    expect(inf.hasSynced()).toBe(false);
    const synced = inf.waitForSync();
    inf.start();
    await synced;
    expect(rec.events).toEqual(['add a@1', 'add b@2']);
    await until(() => lw.watches.length === 1);
    expect(lw.current.resourceVersion).toBe('10');
    expect(lw.current.timeoutSeconds).toBe(5);

    lw.current.emit({ type: 'ADDED', object: obj('c', 11) });
    lw.current.emit({ type: 'MODIFIED', object: obj('a', 12, 'x') });
    lw.current.emit({ type: 'DELETED', object: obj('b', 13) });
    lw.current.emit({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } });
    expect(rec.events.slice(2)).toEqual(['add c@11', 'update a@1->12', 'delete b@13']);
    expect(inf.keys().sort()).toEqual(['ns/a', 'ns/c']);
    expect(inf.get('ns/a')?.data).toBe('x');
    expect(inf.resourceVersion).toBe('15');

    // The server ends the watch (timeoutSeconds): resume from the bookmark, no relist.
    lw.current.end();
    await until(() => lw.watches.length === 2);
    expect(lw.current.resourceVersion).toBe('15');
    expect(lw.listCalls).toBe(1);
  });

  it('a late handler first receives the cached objects as adds', async () => {
    const lw = new FakeLW();
    lw.lists = [{ items: [obj('a', 1)], resourceVersion: '1' }];
    const { informer: inf } = make(lw);
    inf.start();
    await inf.waitForSync();
    const rec = recorder();
    inf.addHandler(rec.handler);
    expect(rec.events).toEqual(['add a@1']);
  });

  it('restarts a silent watch when the watchdog fires, from the last resourceVersion', async () => {
    vi.useFakeTimers();
    const lw = new FakeLW();
    lw.lists = [{ items: [], resourceVersion: '5' }];
    const { informer: inf, registry } = make(lw);
    inf.start();
    await until(() => lw.watches.length === 1);
    lw.current.emit({ type: 'ADDED', object: obj('a', 6) });
    // Events keep the watchdog armed...
    await vi.advanceTimersByTimeAsync(9_000);
    lw.current.emit({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '7' } } });
    await vi.advanceTimersByTimeAsync(9_000);
    expect(lw.watches).toHaveLength(1);
    // ...silence past 10 s does not.
    await vi.advanceTimersByTimeAsync(1_001);
    await until(() => lw.watches.length === 2);
    expect(lw.watches[0]!.signal.aborted).toBe(true); // the dead connection is torn down
    expect(lw.current.resourceVersion).toBe('7');
    expect(lw.listCalls).toBe(1);
    expect(
      metric(
        await registry.metrics(),
        'informer_watch_restarts_total',
        'informer="things",reason="watchdog"',
      ),
    ).toBe(1);
  });

  it('on a 410 ERROR event relists and synthesizes deletes for objects that vanished meanwhile', async () => {
    const lw = new FakeLW();
    lw.lists = [
      { items: [obj('a', 1), obj('b', 2), obj('c', 3)], resourceVersion: '3' },
      { items: [obj('a', 1), obj('c', 9), obj('d', 8)], resourceVersion: '20' },
    ];
    const { informer: inf, registry } = make(lw);
    const rec = recorder();
    inf.addHandler(rec.handler);
    inf.start();
    await until(() => lw.watches.length === 1);
    lw.current.emit({
      type: 'ERROR',
      object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' },
    });
    await until(() => lw.watches.length === 2);
    expect(rec.events.slice(3)).toEqual(['delete b@2', 'update c@3->9', 'add d@8']); // a unchanged: no event
    expect(inf.keys().sort()).toEqual(['ns/a', 'ns/c', 'ns/d']);
    expect(lw.current.resourceVersion).toBe('20');
    const text = await registry.metrics();
    expect(metric(text, 'informer_relists_total', 'informer="things"')).toBe(2);
    expect(metric(text, 'informer_watch_restarts_total', 'informer="things",reason="expired"')).toBe(1);
    expect(metric(text, 'informer_watch_events_total', 'informer="things",type="ERROR"')).toBe(1);
  });

  it('on an HTTP 410 answer to the watch relists as well', async () => {
    const lw = new FakeLW();
    lw.lists = [
      { items: [obj('a', 1)], resourceVersion: '1' },
      { items: [], resourceVersion: '30' },
    ];
    const { informer: inf } = make(lw);
    const rec = recorder();
    inf.addHandler(rec.handler);
    inf.start();
    await until(() => lw.watches.length === 1);
    lw.current.fail(new KubeApiError(410, { reason: 'Gone', code: 410 }));
    await until(() => lw.watches.length === 2);
    expect(rec.events).toEqual(['add a@1', 'delete a@1']);
    expect(inf.list()).toEqual([]);
  });

  it('backs off after failures (honouring Retry-After) and keeps trying; failing lists do not sync', async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, 'random').mockReturnValue(0.5); // jitter factor 1.0
    const lw = new FakeLW();
    lw.lists = [
      new Error('connection refused'),
      new Error('connection refused'),
      { items: [], resourceVersion: '1' },
    ];
    const { informer: inf, registry } = make(lw);
    inf.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(lw.listCalls).toBe(1);
    expect(inf.hasSynced()).toBe(false);
    await vi.advanceTimersByTimeAsync(100); // first backoff 100 ms
    expect(lw.listCalls).toBe(2);
    await vi.advanceTimersByTimeAsync(199);
    expect(lw.listCalls).toBe(2);
    await vi.advanceTimersByTimeAsync(1); // second backoff 200 ms
    expect(lw.listCalls).toBe(3);
    expect(inf.hasSynced()).toBe(true);
    await until(() => lw.watches.length === 1);
    lw.current.fail(new KubeApiError(429, { code: 429, details: { retryAfterSeconds: 3 } }));
    await vi.advanceTimersByTimeAsync(2_999);
    expect(lw.watches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(lw.watches).toHaveLength(2);
    expect(
      metric(await registry.metrics(), 'informer_watch_restarts_total', 'informer="things",reason="error"'),
    ).toBe(3);
  });

  it('backs off when the server closes watches at once without events', async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const lw = new FakeLW();
    lw.lists = [{ items: [], resourceVersion: '1' }];
    make(lw).informer.start();
    await until(() => lw.watches.length === 1);
    lw.current.end();
    await vi.advanceTimersByTimeAsync(99);
    expect(lw.watches).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(lw.watches).toHaveLength(2);
  });

  it('replays the cache to onUpdate on resync', async () => {
    vi.useFakeTimers();
    const lw = new FakeLW();
    lw.lists = [{ items: [obj('a', 1), obj('b', 2)], resourceVersion: '2' }];
    const { informer: inf } = make(lw, { resyncSeconds: 60 });
    const rec = recorder();
    inf.addHandler(rec.handler);
    inf.start();
    await until(() => inf.hasSynced());
    await vi.advanceTimersByTimeAsync(60_000);
    expect(rec.events.slice(2)).toEqual(['update a@1->1', 'update b@2->2']);
  });

  it('isolates a throwing handler from the cache and from other handlers', async () => {
    const lw = new FakeLW();
    lw.lists = [{ items: [obj('a', 1)], resourceVersion: '1' }];
    const { informer: inf } = make(lw);
    inf.addHandler({
      onAdd: () => {
        throw new Error('handler bug');
      },
    });
    const rec = recorder();
    inf.addHandler(rec.handler);
    inf.start();
    await inf.waitForSync();
    expect(rec.events).toEqual(['add a@1']);
    expect(inf.get('ns/a')).toBeDefined();
  });

  it('stop() ends the loop and tears down the open watch', async () => {
    const lw = new FakeLW();
    lw.lists = [{ items: [], resourceVersion: '1' }];
    const { informer: inf } = make(lw);
    inf.start();
    await until(() => lw.watches.length === 1);
    await inf.stop();
    expect(lw.current.signal.aborted).toBe(true);
    expect(lw.watches).toHaveLength(1);
  });

  it('waitForSync can be abandoned with a signal', async () => {
    const lw = new FakeLW();
    lw.lists = [new Error('down')];
    const { informer: inf } = make(lw);
    const ac = new AbortController();
    const waiting = inf.waitForSync(ac.signal);
    inf.start();
    ac.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
    await inf.stop();
    informer = undefined;
  });

  it('refuses a server timeout that is not below the watchdog', () => {
    const lw = new FakeLW();
    expect(
      () =>
        new Informer({ name: 'x', listerWatcher: lw, logger, watchdogSeconds: 30, watchTimeoutSeconds: 30 }),
    ).toThrow(RangeError);
  });
});

describe('event sources (what a controller queues behind fresh changes)', () => {
  const sourceRecorder = () => {
    const seen: string[] = [];
    return {
      seen,
      handler: {
        onAdd: (o: Obj, source: string) => seen.push(`add ${o.metadata.name} ${source}`),
        onUpdate: (_a: Obj, b: Obj, source: string) => seen.push(`update ${b.metadata.name} ${source}`),
        onDelete: (o: Obj, source: string) => seen.push(`delete ${o.metadata.name} ${source}`),
      },
    };
  };

  it("'list' for the initial list, relists and late replays; 'watch' for watch events", async () => {
    const lw = new FakeLW();
    lw.lists = [
      { items: [obj('a', 1), obj('b', 2)], resourceVersion: '2' },
      { items: [obj('a', 4), obj('c', 9)], resourceVersion: '20' },
    ];
    const { informer: inf } = make(lw);
    const { seen, handler } = sourceRecorder();
    inf.addHandler(handler);
    inf.start();
    await until(() => lw.watches.length === 1);
    lw.current.emit({ type: 'ADDED', object: obj('d', 3) });
    lw.current.emit({ type: 'MODIFIED', object: obj('a', 4) });
    lw.current.emit({ type: 'DELETED', object: obj('d', 5) });
    expect(seen.splice(0)).toEqual([
      'add a list',
      'add b list',
      'add d watch',
      'update a watch',
      'delete d watch',
    ]);
    lw.current.emit({
      type: 'ERROR',
      object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' },
    });
    await until(() => lw.watches.length === 2);
    expect(seen.splice(0)).toEqual(['delete b list', 'add c list']); // a unchanged: no event
    const late = sourceRecorder();
    inf.addHandler(late.handler);
    expect(late.seen.sort()).toEqual(['add a list', 'add c list']);
  });

  it("'resync' for the periodic replay", async () => {
    vi.useFakeTimers();
    const lw = new FakeLW();
    lw.lists = [{ items: [obj('a', 1), obj('b', 2)], resourceVersion: '2' }];
    const { informer: inf } = make(lw, { resyncSeconds: 60 });
    const { seen, handler } = sourceRecorder();
    inf.addHandler(handler);
    inf.start();
    await until(() => inf.hasSynced());
    await vi.advanceTimersByTimeAsync(60_000);
    expect(seen.slice(2)).toEqual(['update a resync', 'update b resync']);
  });
});

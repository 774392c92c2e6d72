import { Registry } from 'prom-client';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Informer } from '../../../src/kube/informer.ts';
import { resourcePath, type KubeClient } from '../../../src/kube/client.ts';
import { kubeListerWatcher, type ListerWatcher, type WatchEvent } from '../../../src/kube/listwatch.ts';
import {
  RUNS,
  adminClient,
  createRun,
  deleteRun,
  freshNamespace,
  labelRun,
  logger,
  metric,
  waitFor,
  type RunObject,
} from './helpers.ts';

/**
 * The informer against the real kube-apiserver. Faults are injected by wrapping the real
 * ListerWatcher (the same seam a fake uses): the list and watch requests themselves are real.
 */

let client: KubeClient;
let ns: string;
beforeAll(async () => {
  client = adminClient();
  ns = await freshNamespace(client, 'informer');
});

interface Faulty extends ListerWatcher<RunObject> {
  /** Real connections opened so far, and the resourceVersion each was opened from. */
  watches: string[];
  /** Hang the next watch: keep the real connection but deliver nothing and never end (a half-open TCP). */
  stallNext: boolean;
  /** Destroy the socket of the current watch (as a network failure would). */
  cut(): void;
  /** While set, new watches wait for it (a window in which the informer has no connection). */
  gate: Promise<void> | undefined;
  /** Replace the resourceVersion of the next watch (a stale one makes the real server answer 410). */
  overrideNextRv: string | undefined;
}

function faulty(real: ListerWatcher<RunObject>): Faulty {
  let current: AbortController | undefined;
  const f: Faulty = {
    watches: [],
    stallNext: false,
    gate: undefined,
    overrideNextRv: undefined,
    cut: () => current?.abort(new Error('connection reset (injected)')),
    list: (signal) => real.list(signal),
    async watch(options, onEvent) {
      if (f.gate) await f.gate;
      const resourceVersion = f.overrideNextRv ?? options.resourceVersion;
      f.overrideNextRv = undefined;
      f.watches.push(resourceVersion);
      const conn = new AbortController();
      current = conn;
      const signal = AbortSignal.any([options.signal, conn.signal]);
      if (f.stallNext) {
        f.stallNext = false;
        void real.watch({ ...options, resourceVersion, signal }, () => undefined).catch(() => undefined);
        return new Promise<void>((_, reject) =>
          options.signal.addEventListener('abort', () => reject(options.signal.reason as Error), {
            once: true,
          }),
        );
      }
      return real.watch({ ...options, resourceVersion, signal }, onEvent);
    },
  };
  return f;
}

function recorder() {
  const events: string[] = [];
  return {
    events,
    handler: {
      onAdd: (o: RunObject) => events.push(`add ${o.metadata.name}`),
      onUpdate: (a: RunObject, b: RunObject) => {
        if (a !== b) events.push(`update ${b.metadata.name}`);
      },
      onDelete: (o: RunObject) => events.push(`delete ${o.metadata.name}`),
    },
  };
}

const informers: Informer<RunObject>[] = [];
afterEach(async () => {
  await Promise.all(informers.splice(0).map((i) => i.stop()));
});

function start(
  lw: ListerWatcher<RunObject>,
  opts: { watchdogSeconds?: number; watchTimeoutSeconds?: number } = {},
) {
  const registry = new Registry();
  const inf = new Informer<RunObject>({
    name: 'runs',
    listerWatcher: lw,
    logger,
    registry,
    watchdogSeconds: opts.watchdogSeconds ?? 30,
    watchTimeoutSeconds: opts.watchTimeoutSeconds ?? 20,
    backoff: { initialMs: 100, maxMs: 1000 },
  });
  informers.push(inf);
  const rec = recorder();
  inf.addHandler(rec.handler);
  inf.start();
  return { inf, rec, registry };
}

describe('Informer against the real API server', () => {
  it('lists existing Runs, then sees adds, updates and deletes; bookmarks arrive on a quiet watch', async () => {
    const sub = await freshNamespace(client, 'inf-basic');
    await createRun(client, sub, 'pre');
    const lw = faulty(kubeListerWatcher<RunObject>(client, resourcePath(RUNS, { namespace: sub })));
    // Server timeout 3 s: its bookmark comes ~2 s before the close, well inside the 5 s watchdog.
    const { inf, rec, registry } = start(lw, { watchdogSeconds: 5, watchTimeoutSeconds: 3 });
    await inf.waitForSync();
    expect(inf.keys()).toEqual([`${sub}/pre`]);

    await createRun(client, sub, 'a');
    await labelRun(client, sub, 'a', { touched: 'yes' });
    await deleteRun(client, sub, 'pre');
    await waitFor(() => rec.events.length >= 4, 30_000, 'events');
    expect(rec.events).toEqual(['add pre', 'add a', 'update a', 'delete pre']);
    expect(inf.get(`${sub}/a`)?.metadata.labels).toEqual({ touched: 'yes' });
    expect(inf.get(`${sub}/pre`)).toBeUndefined();

    // A quiet period longer than the server timeout: the server ends watches (reason closed), we
    // resume from the bookmark's version, and the watchdog never needs to fire.
    await waitFor(() => lw.watches.length >= 3, 15_000, 'server-side watch timeouts');
    // The server sends a bookmark at its discretion before it ends a watch; on a busy machine the
    // first short watches may end without one, so later cycles get their chance (bounded).
    await waitFor(
      async () =>
        metric(await registry.metrics(), 'informer_watch_events_total', 'informer="runs",type="BOOKMARK"') >=
        1,
      45_000,
      'a bookmark',
    );
    const text = await registry.metrics();
    expect(
      metric(text, 'informer_watch_events_total', 'informer="runs",type="BOOKMARK"'),
    ).toBeGreaterThanOrEqual(1);
    expect(
      metric(text, 'informer_watch_restarts_total', 'informer="runs",reason="closed"'),
    ).toBeGreaterThanOrEqual(2);
    expect(metric(text, 'informer_watch_restarts_total', 'informer="runs",reason="watchdog"')).toBe(0);
    expect(metric(text, 'informer_relists_total', 'informer="runs"')).toBe(1);
    expect(new Set(lw.watches.slice(1)).has('')).toBe(false);
  });

  it('a silently stalled watch is restarted by the watchdog and the changes made meanwhile arrive', async () => {
    const sub = await freshNamespace(client, 'inf-stall');
    await createRun(client, sub, 'a');
    const lw = faulty(kubeListerWatcher<RunObject>(client, resourcePath(RUNS, { namespace: sub })));
    const { inf, rec, registry } = start(lw, { watchdogSeconds: 3, watchTimeoutSeconds: 2 });
    await inf.waitForSync();
    // The next connection hangs. Wait for it, then change things behind its back.
    lw.stallNext = true;
    const opened = lw.watches.length;
    await waitFor(() => lw.watches.length > opened, 10_000, 'stalled watch');
    await createRun(client, sub, 'during-stall');
    await labelRun(client, sub, 'a', { changed: 'during-stall' });
    await new Promise((r) => setTimeout(r, 1000));
    expect(inf.get(`${sub}/during-stall`)).toBeUndefined(); // really stalled

    await waitFor(() => inf.get(`${sub}/during-stall`) !== undefined, 20_000, 'recovery');
    await waitFor(() => inf.get(`${sub}/a`)?.metadata.labels?.changed === 'during-stall', 5_000, 'update');
    expect(rec.events).toEqual(['add a', 'add during-stall', 'update a']);
    const text = await registry.metrics();
    expect(metric(text, 'informer_watch_restarts_total', 'informer="runs",reason="watchdog"')).toBe(1);
    expect(metric(text, 'informer_relists_total', 'informer="runs"')).toBe(1); // resumed, no relist needed
  });

  it('a cut connection is re-established from the last resourceVersion; objects created in the gap are seen', async () => {
    const sub = await freshNamespace(client, 'inf-cut');
    const lw = faulty(kubeListerWatcher<RunObject>(client, resourcePath(RUNS, { namespace: sub })));
    const { inf, rec, registry } = start(lw);
    await inf.waitForSync();
    await createRun(client, sub, 'before');
    await waitFor(() => inf.get(`${sub}/before`) !== undefined, 10_000, 'before');
    const rvBefore = inf.resourceVersion;

    let open!: () => void;
    lw.gate = new Promise((r) => (open = r));
    lw.cut();
    await createRun(client, sub, 'gap-1');
    await createRun(client, sub, 'gap-2');
    await new Promise((r) => setTimeout(r, 300));
    expect(inf.get(`${sub}/gap-1`)).toBeUndefined();
    lw.gate = undefined;
    open();

    await waitFor(() => inf.get(`${sub}/gap-2`) !== undefined, 20_000, 'gap objects');
    expect(lw.watches.at(-1)).toBe(rvBefore);
    expect(rec.events).toEqual(['add before', 'add gap-1', 'add gap-2']);
    const text = await registry.metrics();
    expect(metric(text, 'informer_watch_restarts_total', 'informer="runs",reason="error"')).toBe(1);
    expect(metric(text, 'informer_relists_total', 'informer="runs"')).toBe(1);
  });

  it('410 Gone from the real server (stale resourceVersion) triggers a relist that synthesizes deletes', async () => {
    const sub = await freshNamespace(client, 'inf-gone');
    await createRun(client, sub, 'keep');
    await createRun(client, sub, 'doomed');
    const lw = faulty(kubeListerWatcher<RunObject>(client, resourcePath(RUNS, { namespace: sub })));
    const { inf, rec, registry } = start(lw);
    await inf.waitForSync();
    // Make sure a real watch is open before cutting it.
    await waitFor(() => lw.watches.length >= 1, 10_000, 'first watch');

    let open!: () => void;
    lw.gate = new Promise((r) => (open = r));
    lw.cut();
    await deleteRun(client, sub, 'doomed');
    await createRun(client, sub, 'born');
    // As if the informer had been away longer than the server's watch window: resourceVersion 1 is
    // far older than the watch cache of the Run CRD, so the server answers with ERROR 410 Expired.
    lw.overrideNextRv = '1';
    lw.gate = undefined;
    open();

    await waitFor(
      () => inf.get(`${sub}/born`) !== undefined && inf.get(`${sub}/doomed`) === undefined,
      20_000,
      'relist',
    );
    expect(lw.watches).toContain('1');
    expect(rec.events.slice(0, 2).sort()).toEqual(['add doomed', 'add keep']);
    expect(rec.events.slice(2).sort()).toEqual(['add born', 'delete doomed']);
    expect(inf.keys().sort()).toEqual([`${sub}/born`, `${sub}/keep`]);
    const text = await registry.metrics();
    expect(metric(text, 'informer_watch_events_total', 'informer="runs",type="ERROR"')).toBe(1);
    expect(metric(text, 'informer_watch_restarts_total', 'informer="runs",reason="expired"')).toBe(1);
    expect(metric(text, 'informer_relists_total', 'informer="runs"')).toBe(2);
  });

  it('watches all namespaces with a label selector', async () => {
    const label = `sel-${Date.now()}`;
    const lw = kubeListerWatcher<RunObject>(client, resourcePath(RUNS), {
      labelSelector: `suite=${label}`,
      pageSize: 1,
    });
    await createRun(client, ns, 'l1', { suite: label });
    await createRun(client, ns, 'l2', { suite: label });
    await createRun(client, ns, 'other');
    const { inf } = start(lw);
    await inf.waitForSync(); // two pages of one item each, stitched with a continue token
    expect(inf.keys().sort()).toEqual([`${ns}/l1`, `${ns}/l2`]);
    const seen: WatchEvent<RunObject>['type'][] = [];
    inf.addHandler({ onAdd: () => seen.push('ADDED') });
    await createRun(client, ns, 'l3', { suite: label });
    await waitFor(() => inf.get(`${ns}/l3`) !== undefined, 10_000, 'l3');
    expect(seen).toHaveLength(3); // two replayed on addHandler, one new
  });
});

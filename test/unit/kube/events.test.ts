import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventRecorder } from '../../../src/kube/events.ts';
import { KubeApiError, type KubeClient, type RequestSpec } from '../../../src/kube/client.ts';

const logger = pino({ level: 'silent' });

function fakeClient(fail?: (spec: RequestSpec) => Error | undefined) {
  const calls: RequestSpec[] = [];
  const client: KubeClient = {
    request<T>(spec: RequestSpec): Promise<T> {
      calls.push(spec);
      const err = fail?.(spec);
      return err ? Promise.reject(err) : Promise.resolve({} as T);
    },
    stream: () => Promise.reject(new Error('unused')),
  };
  return { client, calls };
}

const run = {
  apiVersion: 'vault.service.dev/v1',
  kind: 'Run',
  metadata: { name: 'r1', namespace: 'team-a', uid: 'u-1', resourceVersion: '7' },
};

afterEach(() => vi.useRealTimers());

describe('EventRecorder', () => {
  it('creates an events.k8s.io/v1 Event about the object', async () => {
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({
      client,
      reportingController: 'vault.service.dev/controller',
      reportingInstance: 'pod-1',
      logger,
      fieldManager: 'ctl',
    });
    await rec.event(run, 'Warning', 'SigningFailed', 'no key', 'Sign');
    expect(calls).toHaveLength(1);
    const c = calls[0]!;
    expect(c.method).toBe('POST');
    expect(c.path).toBe('/apis/events.k8s.io/v1/namespaces/team-a/events');
    expect(c.query).toEqual({ fieldManager: 'ctl' });
    const body = c.body as Record<string, unknown>;
    expect(body).toMatchObject({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      type: 'Warning',
      reason: 'SigningFailed',
      action: 'Sign',
      note: 'no key',
      reportingController: 'vault.service.dev/controller',
      reportingInstance: 'pod-1',
      regarding: {
        apiVersion: 'vault.service.dev/v1',
        kind: 'Run',
        name: 'r1',
        namespace: 'team-a',
        uid: 'u-1',
        resourceVersion: '7',
      },
    });
    expect((body.metadata as { name: string }).name).toMatch(/^r1\.[0-9a-f]+$/);
    expect(body.eventTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('folds a hot loop into one create and one series patch per interval, with the final count', async () => {
    vi.useFakeTimers();
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({
      client,
      reportingController: 'c',
      reportingInstance: 'i',
      logger,
      seriesIntervalMs: 10_000,
    });
    await rec.event(run, 'Normal', 'Reconciled', 'ok');
    for (let i = 0; i < 500; i++) await rec.event(run, 'Normal', 'Reconciled', 'ok');
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(2);
    expect(calls[1]).toMatchObject({ method: 'PATCH', contentType: 'application/merge-patch+json' });
    expect((calls[1]!.body as { series: { count: number } }).series.count).toBe(501);
    expect(calls[1]!.path).toBe(
      `/apis/events.k8s.io/v1/namespaces/team-a/events/${(calls[0]!.body as { metadata: { name: string } }).metadata.name}`,
    );
    for (let i = 0; i < 9; i++) await rec.event(run, 'Normal', 'Reconciled', 'ok');
    await vi.advanceTimersByTimeAsync(9_999);
    expect(calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect((calls[2]!.body as { series: { count: number } }).series.count).toBe(510);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(3); // nothing new: no writes
  });

  it('keeps different reasons, notes, types and objects apart', async () => {
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({ client, reportingController: 'c', reportingInstance: 'i', logger });
    await rec.event(run, 'Normal', 'A', 'x');
    await rec.event(run, 'Normal', 'B', 'x');
    await rec.event(run, 'Normal', 'A', 'y');
    await rec.event(run, 'Warning', 'A', 'x');
    await rec.event({ ...run, metadata: { ...run.metadata, uid: 'u-2', name: 'r2' } }, 'Normal', 'A', 'x');
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(5);
  });

  it('starts a new Event after the TTL, and flush()/close() write pending counts', async () => {
    vi.useFakeTimers();
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({
      client,
      reportingController: 'c',
      reportingInstance: 'i',
      logger,
      ttlMs: 60_000,
      seriesIntervalMs: 30_000,
    });
    await rec.event(run, 'Normal', 'A', 'x');
    await rec.event(run, 'Normal', 'A', 'x');
    await rec.flush();
    expect(calls.map((c) => c.method)).toEqual(['POST', 'PATCH']);
    await vi.advanceTimersByTimeAsync(61_000);
    await rec.event(run, 'Normal', 'A', 'x');
    expect(calls.map((c) => c.method)).toEqual(['POST', 'PATCH', 'POST']);
    await rec.event(run, 'Normal', 'A', 'x');
    await rec.close();
    expect(calls.map((c) => c.method)).toEqual(['POST', 'PATCH', 'POST', 'PATCH']);
  });

  it('never rejects; a failed create is retried as a create on the next occurrence; 404 on patch starts over', async () => {
    let failCreate = true;
    let patch404 = false;
    const { client, calls } = fakeClient((spec) => {
      if (spec.method === 'POST' && failCreate) return new KubeApiError(403, { reason: 'Forbidden' });
      if (spec.method === 'PATCH' && patch404) return new KubeApiError(404, { reason: 'NotFound' });
      return undefined;
    });
    const rec = new EventRecorder({ client, reportingController: 'c', reportingInstance: 'i', logger });
    await expect(rec.event(run, 'Normal', 'A', 'x')).resolves.toBeUndefined();
    failCreate = false;
    await rec.event(run, 'Normal', 'A', 'x');
    expect(calls.map((c) => c.method)).toEqual(['POST', 'POST']);
    patch404 = true;
    await rec.event(run, 'Normal', 'A', 'x');
    await rec.flush();
    await rec.event(run, 'Normal', 'A', 'x'); // the Event was gone: a fresh create
    expect(calls.map((c) => c.method)).toEqual(['POST', 'POST', 'PATCH', 'POST']);
  });

  it('puts events of cluster-scoped objects in default and truncates long notes on a character boundary', async () => {
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({ client, reportingController: 'c', reportingInstance: 'i', logger });
    await rec.event(
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } },
      'Normal',
      'A',
      'é'.repeat(1000),
    );
    expect(calls[0]!.path).toBe('/apis/events.k8s.io/v1/namespaces/default/events');
    const note = (calls[0]!.body as { note: string }).note;
    expect(Buffer.byteLength(note)).toBeLessThanOrEqual(1024);
    expect(note).toMatch(/^(é)+\.\.\.$/);
  });
});

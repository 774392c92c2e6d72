/**
 * Metrics and logs of the real processes: the controller and the sidecar started as
 * `npm run stack -- up` starts them (hack/stack/stack.ts `startServices`: each under its own
 * ServiceAccount, LOG_LEVEL=debug, the transparency writer on), against the test stack, on a fresh
 * database, watching one namespace.
 *
 * - Both /metrics endpoints serve every metric docs/metrics.md lists, for the process it names,
 *   before the first Run (counters at 0), and with values that agree with the vault after a Run
 *   reached its AIBOM, its records were published and one download was blocked.
 * - Every JSON line both processes wrote, from start to shutdown, holds each key once (checked on
 *   the raw text: JSON.parse keeps the last of two equal keys).
 * - The sidecar logs each request once, with status and latency: 2xx and other 4xx at info, 401 at
 *   warn, a 409 conflict (a blocked download) at info, nothing of that at error.
 */
import { readFile, mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { driveRun } from '../../hack/sample-pipeline.ts';
import { repoRoot, startServices, stopAll, type StackInfo } from '../../hack/stack/stack.ts';
import type { Run } from '../../src/crd/run.ts';
import { stackBlobs } from '../helpers/blobs.ts';
import { createRun, getRun, metricValue, poll, sampleRunSpec } from '../helpers/controller-process.ts';
import { duplicateKeys } from '../helpers/json-keys.ts';
import { createNamespace } from '../helpers/rbac.ts';
import { envForOtherDatabase, freshDatabase, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

interface Documented {
  name: string;
  type: string;
  labels: string[];
  processes: ('controller' | 'sidecar')[];
}

/** The table of docs/metrics.md: name, type, labels, process. */
async function documentedMetrics(): Promise<Documented[]> {
  const text = await readFile(join(repoRoot, 'docs/metrics.md'), 'utf8');
  const section = text.slice(
    text.indexOf("## The service's own metrics"),
    text.indexOf('## Runtime metrics'),
  );
  const rows = section.split('\n').filter((l) => /^\| `[a-z_]+`/.test(l));
  return rows.map((row) => {
    const [name, type, labels, process] = row
      .split('|')
      .slice(1, 5)
      .map((c) => c.trim());
    return {
      name: name!.replaceAll('`', ''),
      type: type!,
      labels: [...labels!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!),
      processes: process === 'both' ? ['controller', 'sidecar'] : [process as 'controller' | 'sidecar'],
    };
  });
}

/** Runtime metric names the docs list for the controller (`controller_runtime_*`, `workqueue_*`, ...). */
async function documentedRuntimeMetrics(): Promise<string[]> {
  const text = await readFile(join(repoRoot, 'docs/metrics.md'), 'utf8');
  const section = text.slice(text.indexOf('## Runtime metrics'), text.indexOf('## Alerts'));
  return [...section.matchAll(/`((?:controller_runtime|workqueue|informer|leader_election)_[a-z_]+)/g)].map(
    (m) => m[1]!,
  );
}

/** Label names of the samples of `name` (histograms: of its `_count` series). */
function labelNamesOf(exposition: string, name: string): Set<string> {
  const out = new Set<string>();
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name}_count{`)) continue;
    for (const m of line.matchAll(/([a-z_]+)="/g)) out.add(m[1]!);
  }
  return out;
}

const ns = uniqueName('observe');
const lease = uniqueName('observe');
let info: StackInfo;
let apiUrl: string;
let databaseUrl: string;
let stopped = false;

const logFile = (name: 'controller' | 'sidecar') => join(info.root, `${name}.log`);

async function rawLines(name: 'controller' | 'sidecar'): Promise<string[]> {
  return (await readFile(logFile(name), 'utf8')).split('\n').filter((l) => l.startsWith('{'));
}
const lines = async (name: 'controller' | 'sidecar'): Promise<LogLine[]> =>
  (await rawLines(name)).map((l) => JSON.parse(l) as LogLine);

async function metricsUrl(name: 'controller' | 'sidecar'): Promise<string> {
  const [msg, key] =
    name === 'controller' ? ['controller started', 'port'] : ['sidecar listening', 'metricsPort'];
  const port = await poll(async () => (await lines(name)).find((l) => l.msg === msg)?.[key] as number, msg);
  return `http://127.0.0.1:${port}/metrics`;
}

async function scrape(name: 'controller' | 'sidecar'): Promise<string> {
  const res = await fetch(await metricsUrl(name));
  expect(res.status, `${name} /metrics`).toBe(200);
  return res.text();
}

beforeAll(async () => {
  databaseUrl = await freshDatabase('observe');
  await createNamespace(ns);
  const base = stack();
  // The stack's wiring with this test's own database, temp dir (the two log files) and processes.
  info = {
    ...base,
    root: await mkdtemp(join(base.root, 'observe-')),
    procs: [],
    env: envForOtherDatabase(databaseUrl),
  };
  ({ apiUrl } = await startServices(info, {
    LOG_LEVEL: 'debug',
    WATCH_NAMESPACE: ns,
    LEADER_ELECTION_LEASE: lease,
    SERVICE_TRANSPARENCY_WRITER: '1',
    SERVICE_REQUIRE_SIGNED_EXPORTS: '1',
  }));
}, 180_000);

afterAll(async () => {
  if (!stopped) await stopAll(info?.procs ?? []);
});

describe('metrics', () => {
  it('both processes serve every documented metric from the start, counters at 0', async () => {
    const documented = await documentedMetrics();
    expect(documented.length).toBeGreaterThanOrEqual(8);
    // Leading (the runtime metrics of the Run controller exist once it leads).
    await poll(
      async () => metricValue(await scrape('controller'), 'leader_election_master_status') === 1,
      'leading',
    );
    const expositions = { controller: await scrape('controller'), sidecar: await scrape('sidecar') };
    for (const m of documented) {
      for (const p of m.processes) {
        const text = expositions[p];
        expect(text, `${m.name} on the ${p}`).toContain(`# TYPE ${m.name} ${m.type}\n`);
        // Per-witness series exist once a witness is configured (TLOG_WITNESSES, unset here): the
        // metric is declared, with no series yet (test/integration/transparency/witness.test.ts).
        if (m.labels.includes('witness') && !text.includes(`\n${m.name}{`)) continue;
        expect(labelNamesOf(text, m.name), `${m.name} labels on the ${p}`).toEqual(new Set(m.labels));
        if (m.type === 'counter') expect(metricValue(text, m.name), `${m.name} on the ${p}`).toBe(0);
      }
    }
    for (const kind of ['run', 'step', 'artifact', 'policy', 'capability', 'aibom']) {
      expect(expositions.controller).toContain(`aibom_vault_attestations_recorded_total{kind="${kind}"} 0`);
    }
    for (const status of ['succeeded', 'failed'])
      expect(expositions.controller).toContain(`aibom_vault_aiboms_recorded_total{status="${status}"} 0`);
    for (const state of ['queued', 'published'])
      expect(expositions.controller).toContain(`aibom_vault_transparency_jobs{state="${state}"} 0`);
    // A job is queued until it is published: no third series.
    expect(expositions.controller).not.toContain('aibom_vault_transparency_jobs{state="failed"}');
    expect(expositions.controller).toContain('aibom_vault_transparency_jobs_retrying 0');
    expect(expositions.sidecar).toContain('aibom_vault_exports_blocked_total 0');
    for (const name of await documentedRuntimeMetrics()) {
      expect(expositions.controller, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
  });

  describe('after a Run', () => {
    let run: Run;
    const token = () => stack().kube.tokens.admin;
    const requests: { path: string; status: number; auth: string | undefined }[] = [];
    const request = async (path: string, auth: string | undefined): Promise<Response> => {
      const res = await fetch(
        `${apiUrl}${path}`,
        auth ? { headers: { authorization: `Bearer ${auth}` } } : {},
      );
      await res.arrayBuffer();
      requests.push({ path, status: res.status, auth });
      return res;
    };

    beforeAll(async () => {
      await createRun(ns, 'observed', await sampleRunSpec());
      await driveRun(kubeConfig('admin'), ns, 'observed', { stepDelayMs: 20 });
      run = await poll(
        async () => {
          const r = await getRun(ns, 'observed');
          const ready = r.status?.conditions?.some((c) => c.type === 'AIBOMReady' && c.status === 'True');
          const t = r.status?.transparency;
          return ready && t?.state === 'published' && t.published === r.status?.attestations?.count
            ? r
            : undefined;
        },
        'the Run recorded and published',
        { timeoutMs: 180_000 },
      );
      const id = run.metadata.uid;
      expect((await request(`/v1/runs/${id}`, token())).status).toBe(200);
      expect((await request(`/v1/runs/${id}`, undefined)).status).toBe(401);
      expect((await request(`/v1/runs/${id}`, stack().kube.tokens.alice)).status).toBe(404);
      // A manifest that no longer verifies: the download is blocked (409 UNSIGNED_EXPORT_BLOCKED).
      const meta = run.status?.artifacts?.aibom as { c2pa_manifest: { key: string } };
      await stackBlobs().put(meta.c2pa_manifest.key, Buffer.from('not a manifest'), 'application/c2pa');
      expect((await request(`/v1/runs/${id}/artifacts/aibom`, token())).status).toBe(409);
    }, 240_000);

    it('counts what the vault holds: records by kind, the AIBOM, published jobs; one blocked download', async () => {
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      let kinds: Map<string, number>;
      try {
        const { rows } = await db.query<{ kind: string; n: string }>(
          'SELECT kind, count(*) AS n FROM attestations WHERE run_id = $1 GROUP BY kind',
          [run.metadata.uid],
        );
        kinds = new Map(rows.map((r) => [r.kind, Number(r.n)]));
      } finally {
        await db.end();
      }
      const controller = await scrape('controller');
      for (const kind of ['run', 'step', 'artifact', 'policy', 'capability', 'aibom']) {
        expect(metricValue(controller, 'aibom_vault_attestations_recorded_total', { kind }), kind).toBe(
          kinds.get(kind) ?? 0,
        );
      }
      const total = [...kinds.values()].reduce((a, b) => a + b, 0);
      expect(total).toBe(run.status?.attestations?.count);
      expect(metricValue(controller, 'aibom_vault_aiboms_recorded_total', { status: 'succeeded' })).toBe(1);
      expect(metricValue(controller, 'aibom_vault_aiboms_recorded_total', { status: 'failed' })).toBe(0);
      expect(metricValue(controller, 'aibom_vault_aibom_record_duration_seconds_count')).toBe(1);
      expect(metricValue(controller, 'aibom_vault_transparency_jobs', { state: 'published' })).toBe(total);
      expect(metricValue(controller, 'aibom_vault_transparency_jobs', { state: 'queued' })).toBe(0);
      expect(metricValue(controller, 'aibom_vault_transparency_jobs_retrying')).toBe(0);
      expect(metricValue(controller, 'aibom_vault_transparency_oldest_queued_job_age_seconds')).toBe(0);
      const sidecar = await scrape('sidecar');
      expect(metricValue(sidecar, 'aibom_vault_exports_blocked_total')).toBe(1);
      expect(metricValue(sidecar, 'http_request_duration_seconds_count', { code: '409' })).toBe(1);
    });

    it("reports the seconds until the signer certificate's notAfter, on both processes", async () => {
      const secret = await kubeConfig('admin')
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ namespace: 'aibom-vault-system', name: 'aibom-vault-signer' });
      const { X509Certificate } = await import('node:crypto');
      const pem = Buffer.from(secret.data!['tls.crt']!, 'base64').toString('utf8');
      const notAfter = Date.parse(new X509Certificate(pem).validTo);
      for (const p of ['controller', 'sidecar'] as const) {
        const before = Date.now();
        const text = await scrape(p);
        const after = Date.now();
        const line = text
          .split('\n')
          .find((l) => l.startsWith('aibom_vault_signer_certificate_expiry_seconds{'))!;
        expect(line, p).toMatch(/signer="service",key_id="sha256:[0-9a-f]{64}"/);
        const value = Number(line.split(' ').pop());
        // validTo has whole seconds.
        expect(value, p).toBeGreaterThan((notAfter - after) / 1000 - 1);
        expect(value, p).toBeLessThan((notAfter - before) / 1000 + 1);
      }
    });

    it('logs each request once with status and latency; 401 at warn, a 409 conflict and a 404 at info', async () => {
      const logged = await poll(async () => {
        const r = (await lines('sidecar')).filter((l) => l.msg === 'request' && l.route !== '/readyz');
        return r.length >= requests.length ? r : undefined;
      }, 'the request lines');
      const expected: Record<number, number> = { 200: 30, 401: 40, 404: 30, 409: 30 };
      for (const r of requests) {
        const found = logged.filter((l) => l.path === r.path && l.status === r.status);
        expect(found, `${r.status} ${r.path}`).toHaveLength(1);
        expect(found[0]!.level, `${r.status} ${r.path}`).toBe(expected[r.status]);
        expect(typeof found[0]!.ms).toBe('number');
        expect(found[0]!.method).toBe('GET');
      }
      const blocked = logged.find((l) => l.status === 409)!;
      expect(blocked).toMatchObject({
        code: 'UNSIGNED_EXPORT_BLOCKED',
        route: '/v1/runs/:id/artifacts/:kind',
      });
      expect((await lines('sidecar')).filter((l) => l.level >= 50)).toEqual([]);
    });
  });
});

describe('logs', () => {
  it('no line of either process, from start to shutdown, holds a key twice', async () => {
    // A graceful stop, so the shutdown lines are written too.
    await stopAll(info.procs);
    stopped = true;
    for (const name of ['controller', 'sidecar'] as const) {
      const raw = await rawLines(name);
      // Start, requests (or reconciles), shutdown: the check has lines to look at.
      expect(raw.length, name).toBeGreaterThanOrEqual(8);
      const bad = raw.flatMap((l) => {
        const dups = duplicateKeys(l);
        return dups.length > 0 ? [`${dups.join(',')}: ${l.slice(0, 300)}`] : [];
      });
      expect(bad, name).toEqual([]);
    }
    const sidecar = await lines('sidecar');
    expect(sidecar.map((l) => l.msg)).toEqual(
      expect.arrayContaining(['sidecar listening', 'request', 'stopped']),
    );
    // The check saw the nested bindings where duplicates used to come from.
    const controller = await lines('controller');
    const keys = (msg: string) => controller.find((l) => l.msg === msg);
    // Whichever process started first applied the migrations.
    expect([...controller, ...sidecar].find((l) => l.msg === 'applying migration')).toMatchObject({
      name: expect.stringMatching(/^(controller|sidecar)$/) as unknown,
      migration: 'attestations',
    });
    expect(keys('started leading')?.component).toBe('leader-election');
    expect(typeof keys('started leading')?.identity).toBe('string');
    expect(keys('AIBOM recorded')).toMatchObject({ component: 'controller', run: `${ns}/observed` });
    expect(controller.some((l) => l.component === 'transparency-worker' && l.identity)).toBe(true);
    // The sidecar runs a SCITT worker too (issue 22 item 3): whichever claimed the job published it.
    expect([...controller, ...sidecar].some((l) => l.component === 'transparency-publisher')).toBe(true);
  });
});

/**
 * The contract rows of issue 22 as a client meets them, on the real controller and sidecar
 * processes with SERVICE_TRANSPARENCY_WRITER off (the default):
 *
 * - artifact records: one per step output and one for the AIBOM blob, whose subjects cosign (an
 *   independent verifier) matches against the bytes (item 6);
 * - the final step (the last to finish in the DAG, not the last listed) references the BOM inside
 *   its output (item 7);
 * - `c2pa_manifest_ref` on every record the AIBOM's manifest staples is an API path that resolves
 *   to the manifest in force, before and after a repair (item 5);
 * - a push (`POST /v1/attestations/scitt`) answers with the spec's common fields (item 4) and, with
 *   the writer off, the AIBOM's `transparency` entry appears nowhere: run detail, `aibom.meta.json`
 *   and the Run's status agree (item 2);
 * - `scitt: true` on an export enqueues jobs that something publishes (the sidecar's worker), and
 *   `service-ctl attestation export --help` says what the flag does (item 3).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex, type DsseEnvelope } from '../../../src/attest/index.ts';
import type { Run, RunSpec, StepStatus } from '../../../src/crd/run.ts';
import { S3Client } from '../../../src/blob/s3.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  aibomReady,
  createRun,
  getRun,
  poll,
  REPO_ROOT,
  startControllerProcess,
  stopAllControllers,
  testEnv,
  waitForCondition,
} from '../../helpers/controller-process.ts';
import { tarEntries } from '../../helpers/export.ts';
import { stack } from '../../helpers/stack.ts';
import { applyPipelineStatus } from '../admission/helpers.ts';

const run = promisify(execFile);
let dir: string;
let namespace: string;
let apiUrl: string;
let signer: KeySigner;
let done: Run;
const token = () => stack().kube.tokens.admin;

interface Envelope {
  id: string;
  kind: string;
  run_id: string | null;
  predicate_type: string;
  predicate: Record<string, unknown>;
  subject: { name: string; digest: { sha256: string } }[];
  envelope: DsseEnvelope;
  c2pa_manifest_ref: string | null;
  transparency: Record<string, unknown> | null;
}

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${apiUrl}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json', ...init.headers },
    signal: AbortSignal.timeout(60_000),
  });

async function records(runId: string): Promise<Envelope[]> {
  const res = await api('/v1/attestations/query', {
    method: 'POST',
    body: JSON.stringify({ run_id: runId, namespaces: [namespace], limit: 1000 }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: Envelope[] }).items;
}

/** cosign verify-blob-attestation: the envelope is signed by `signer` and its subject digest is `blob`'s. */
async function cosign(
  envelope: DsseEnvelope,
  type: string,
  blob: Buffer,
): Promise<{ ok: boolean; out: string }> {
  const key = join(dir, 'signer.pub');
  await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
  await writeFile(join(dir, 'envelope.json'), JSON.stringify(envelope));
  await writeFile(join(dir, 'blob'), blob);
  return run(
    stack().tools.cosign,
    [
      'verify-blob-attestation',
      '--key',
      key,
      '--signature',
      join(dir, 'envelope.json'),
      '--type',
      type,
      '--insecure-ignore-tlog=true',
      join(dir, 'blob'),
    ],
    { env: { ...process.env, COSIGN_EXPERIMENTAL: '0', TUF_ROOT: join(dir, 'tuf') } },
  ).then(
    (r) => ({ ok: true, out: r.stdout + r.stderr }),
    (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

/** The stack's S3-compatible store, for changes behind the service's back. */
const s3 = (): S3Client => {
  const e = stack().env;
  return new S3Client({ endpoint: e.S3_ENDPOINT!, accessKey: e.S3_ACCESS_KEY!, secretKey: e.S3_SECRET_KEY! });
};

// A DAG whose last listed step (`notify`, no dependencies) finishes first: the final step is
// `answer`, the last to finish.
const spec: RunSpec = {
  steps: [
    { id: 'retrieve', tool: { name: 'search', command: ['search'] } },
    { id: 'answer', dependsOn: ['retrieve'], model: { name: 'm', provider: 'p', version: '1' } },
    { id: 'notify', tool: { name: 'mail' } },
  ],
};
const outputs: Record<string, unknown> = {
  retrieve: { hits: ['a', 'b'], ü: 1.5 },
  answer: { text: 'forty-two', tokens: 12 },
  notify: 'sent',
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'contract-'));
  const t = await testEnv('contract', 'contract', dir);
  namespace = t.namespace;
  signer = signerFromPem(t.pki);
  // The writer stays off (the default); the sidecar serves the local log.
  const controller = await startControllerProcess({ ...t.opts(), name: t.lease });
  const sidecar = await startControllerProcess({ ...t.opts(), name: `${t.lease}-api`, bin: 'sidecar' });
  await controller.waitLeading();
  apiUrl = await sidecar.apiUrl();

  await createRun(namespace, 'dag', spec);
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, s)).toISOString();
  const finished = (id: string, start: number, end: number): StepStatus => ({
    id,
    phase: 'Succeeded',
    startedAt: at(start),
    finishedAt: at(end),
    output: outputs[id],
  });
  await applyPipelineStatus(namespace, 'dag', {
    phase: 'Succeeded',
    steps: [finished('retrieve', 0, 2), finished('notify', 0, 1), finished('answer', 3, 9)],
  });
  done = await waitForCondition(namespace, 'dag', 'AIBOMReady', aibomReady, 'the AIBOM');
}, 300_000);

afterAll(async () => {
  await stopAllControllers();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('artifact records (item 6)', () => {
  it('records each step output and the AIBOM blob, with subjects cosign matches against the bytes', async () => {
    const runId = done.metadata.uid;
    const res = await api('/v1/attestations/query', {
      method: 'POST',
      body: JSON.stringify({ kind: 'artifact', namespaces: [namespace] }),
    });
    const items = ((await res.json()) as { items: Envelope[] }).items;
    // Kind artifact also holds the AIBOM's two standard views (issue 26: their predicate is the
    // view; test/integration/views.test.ts checks them); the rest are artifact records.
    expect(items.map((a) => a.subject[0]!.name).sort()).toEqual(
      [
        `artifact:${runId}:aibom`,
        `artifact:${runId}:aibom.cdx-1.7.json`,
        `artifact:${runId}:aibom.spdx-3.0.1.json`,
        `artifact:${runId}:steps/answer/output`,
        `artifact:${runId}:steps/notify/output`,
        `artifact:${runId}:steps/retrieve/output`,
      ].sort(),
    );
    const views = items.filter((a) => /:aibom\.(cdx|spdx)/.test(a.subject[0]!.name));
    expect(views.map((a) => a.predicate_type).sort()).toEqual([
      'https://cyclonedx.org/bom',
      'https://spdx.dev/Document/v3',
    ]);
    const artifacts = items.filter((a) => !views.includes(a));
    expect(artifacts).toHaveLength(4);
    for (const a of artifacts) {
      expect(a.predicate_type).toBe('https://vault.service.dev/attestations/artifact/v1');
      const name = a.subject[0]!.name.slice(`artifact:${runId}:`.length);
      let bytes: Buffer;
      if (name === 'aibom') {
        const download = await api(`/v1/runs/${runId}/artifacts/aibom`);
        expect(download.status).toBe(200);
        bytes = Buffer.from(await download.arrayBuffer());
        expect(a.predicate.location).toMatchObject({
          key: (done.status!.artifacts!.aibom as { key: string }).key,
        });
      } else {
        const step = name.split('/')[1]!;
        // The bytes of a step output: the JCS of the output the pipeline reported.
        bytes = Buffer.from(canonicalJson(outputs[step]), 'utf8');
        expect(a.predicate.location).toEqual({ step });
      }
      expect(a.subject[0]!.digest.sha256).toBe(sha256Hex(bytes));
      expect(a.predicate).toMatchObject({ size: bytes.length, mediaType: 'application/json' });
      const verified = await cosign(a.envelope, a.predicate_type, bytes);
      expect(verified.out).toContain('Verified OK');
      // One byte off: cosign finds no subject of the statement matching the blob.
      const tampered = Buffer.concat([bytes, Buffer.from(' ')]);
      expect((await cosign(a.envelope, a.predicate_type, tampered)).ok).toBe(false);
    }
    // The step record's own outputDigest is the same digest as the artifact's subject.
    const all = await records(runId);
    const answer = all.find((r) => r.kind === 'step' && r.subject[0]!.name.endsWith(':answer'))!;
    expect((answer.predicate.outputDigest as { sha256: string }).sha256).toBe(
      sha256Hex(Buffer.from(canonicalJson(outputs.answer), 'utf8')),
    );
  }, 120_000);
});

describe('the final step (item 7)', () => {
  it('is the last to finish in the DAG, and its output references the BOM inside artifacts.aibom', async () => {
    const detail = (await (await api(`/v1/runs/${done.metadata.uid}`)).json()) as {
      artifacts: { aibom: { digest: string; key: string } };
      steps: Record<string, unknown>[];
    };
    const byId = new Map(detail.steps.map((s) => [s.id as string, s]));
    expect(byId.get('answer')!.output).toEqual({
      value: outputs.answer,
      artifacts: {
        aibom: {
          $ref: '#/artifacts/aibom',
          digest: detail.artifacts.aibom.digest,
          key: detail.artifacts.aibom.key,
        },
      },
    });
    // The others as the pipeline reported them; no reference beside the output.
    expect(byId.get('notify')!.output).toBe('sent');
    expect(byId.get('retrieve')!.output).toEqual(outputs.retrieve);
    for (const s of detail.steps) expect(s).not.toHaveProperty('artifacts');
  });
});

describe('c2pa_manifest_ref (item 5)', () => {
  it('is an API path on every stapled record, resolving to the manifest in force before and after a repair', async () => {
    const runId = done.metadata.uid;
    const ref = `/v1/runs/${runId}/artifacts/aibom/manifest`;
    const all = await records(runId);
    const meta = done.status!.artifacts!.aibom as {
      attestation_ids: string[];
      aibom_attestation_id: string;
      c2pa_manifest: { key: string };
    };
    // Every record of the run but the AIBOM's two standard views: those the manifest lists, the
    // AIBOM's and the AIBOM blob's. The views are recorded after the manifest was signed and are
    // not in it: no ref.
    const viewIds = new Set(
      all
        .filter((r) => r.kind === 'artifact' && /:aibom\.(cdx|spdx)/.test(r.subject[0]!.name))
        .map((r) => r.id),
    );
    expect(viewIds.size).toBe(2);
    for (const r of all) {
      expect({ id: r.id, ref: r.c2pa_manifest_ref }).toEqual({
        id: r.id,
        ref: viewIds.has(r.id) ? null : ref,
      });
    }
    expect(new Set(all.filter((r) => !viewIds.has(r.id)).map((r) => r.id))).toEqual(
      new Set([
        ...meta.attestation_ids,
        meta.aibom_attestation_id,
        ...all.filter((r) => r.kind === 'artifact' && r.subject[0]!.name.endsWith(':aibom')).map((r) => r.id),
      ]),
    );
    const single = (await (await api(`/v1/attestations/${meta.attestation_ids[0]}`)).json()) as Envelope;
    expect(single.c2pa_manifest_ref).toBe(ref);
    const first = await api(ref);
    expect(first.status).toBe(200);
    const stored = await stackBlobs().get(meta.c2pa_manifest.key);
    expect(stored).not.toBeNull();
    expect(Buffer.from(await first.arrayBuffer()).equals(stored!)).toBe(true);

    // A record of a run that has no AIBOM yet has none.
    await createRun(namespace, 'pending', spec);
    await applyPipelineStatus(namespace, 'pending', {
      phase: 'Running',
      steps: [{ id: 'retrieve', phase: 'Succeeded', finishedAt: new Date().toISOString(), output: {} }],
    });
    const pending = await poll(async () => {
      const r = await getRun(namespace, 'pending');
      return (r.status?.attestations?.count ?? 0) > 0 ? r : undefined;
    }, 'a record of the pending run');
    for (const r of await records(pending.metadata.uid)) expect(r.c2pa_manifest_ref).toBeNull();

    // The manifest goes missing: a download opens a repair, the controller re-signs; the same
    // reference now resolves to the new manifest.
    await s3().deleteObject(stack().env.S3_BUCKET!, meta.c2pa_manifest.key);
    expect((await api(`/v1/runs/${runId}/artifacts/aibom`)).status).toBe(409);
    const repaired = await poll(async () => {
      const detail = (await (await api(`/v1/runs/${runId}`)).json()) as {
        artifacts: { aibom: { c2pa_manifest: { key: string; digest: string } } };
      };
      const m = detail.artifacts.aibom.c2pa_manifest;
      return m.key !== meta.c2pa_manifest.key ? m : undefined;
    }, 'the repaired manifest');
    const again = await api(ref);
    expect(again.status).toBe(200);
    const bytes = Buffer.from(await again.arrayBuffer());
    expect(`sha256:${sha256Hex(bytes)}`).toBe(repaired.digest);
    for (const r of await records(runId)) expect(r.c2pa_manifest_ref).toBe(viewIds.has(r.id) ? null : ref);
  }, 240_000);
});

describe('transparency with the writer off (items 2, 3 and 4)', () => {
  const push = (id: string) =>
    api('/v1/attestations/scitt', { method: 'POST', body: JSON.stringify({ id }) });

  it("a push answers with the spec's common fields (item 4)", async () => {
    const aibomId = done.status!.attestations!.aibomAttestationId!;
    const pushed = await push(aibomId);
    expect(pushed.status).toBe(200);
    const answer = (await pushed.json()) as Record<string, unknown>;
    const envelope = (await (await api(`/v1/attestations/${aibomId}`)).json()) as Envelope;
    expect(answer).toMatchObject({
      attestation_id: aibomId,
      status: 'published',
      predicate_type: envelope.predicate_type,
      predicate: envelope.predicate,
      c2pa_manifest_ref: envelope.c2pa_manifest_ref,
    });
    expect(answer.transparency).toEqual(envelope.transparency);
    expect(typeof answer.log_index).toBe('number');
  });

  it('after a push, the AIBOM metadata has no transparency entry in the run detail, aibom.meta.json or the Run (item 2)', async () => {
    const runId = done.metadata.uid;
    const aibomId = done.status!.attestations!.aibomAttestationId!;
    expect((await push(aibomId)).status).toBe(200);
    const detail = (await (await api(`/v1/runs/${runId}`)).json()) as {
      artifacts: { aibom: Record<string, unknown> };
    };
    expect(detail.artifacts.aibom).not.toHaveProperty('transparency');
    const metaKey = (done.status!.artifacts!.aibom as { key: string }).key.replace(
      /aibom\.json$/,
      'aibom.meta.json',
    );
    const metaBytes = await stackBlobs().get(metaKey);
    expect(metaBytes).not.toBeNull();
    expect(JSON.parse(metaBytes!.toString('utf8'))).not.toHaveProperty('transparency');
    const r = await getRun(namespace, 'dag');
    expect(r.status?.artifacts?.aibom).not.toHaveProperty('transparency');
    expect(r.status).not.toHaveProperty('transparency');
  });

  it('an export with scitt: true lists the jobs it enqueued, and they get published (item 3)', async () => {
    const runId = done.metadata.uid;
    const before = await records(runId);
    const exported = await api('/v1/attestations/export', {
      method: 'POST',
      body: JSON.stringify({ run_id: runId, namespaces: [namespace], scitt: true }),
    });
    expect(exported.status).toBe(200);
    const entries = await tarEntries(Buffer.from(await exported.arrayBuffer()));
    const enqueued = entries
      .filter((e) => /^index\/\d+\.json$/.test(e.path))
      .flatMap(
        (e) =>
          (JSON.parse(e.content.toString('utf8')) as { scitt_enqueued: { attestation_id: string }[] })
            .scitt_enqueued,
      );
    // Every record without a job yet (the pushed AIBOM record has one).
    expect(enqueued.map((e) => e.attestation_id).sort()).toEqual(
      before
        .filter((a) => a.transparency === null)
        .map((a) => a.id)
        .sort(),
    );
    expect(enqueued.length).toBeGreaterThan(0);
    // The sidecar's worker publishes them: the controller runs none with the writer off.
    await poll(
      async () => (await records(runId)).every((a) => a.transparency?.status === 'published') || undefined,
      'every exported record published',
      { timeoutMs: 120_000 },
    );
    // Still no AIBOM entry in the run detail: the writer is off.
    const after = (await (await api(`/v1/runs/${runId}`)).json()) as {
      artifacts: { aibom: Record<string, unknown> };
    };
    expect(after.artifacts.aibom).not.toHaveProperty('transparency');

    // The CLI's help says what --scitt does.
    const help = await run(process.execPath, [
      join(REPO_ROOT, 'src/bin/service-ctl.ts'),
      'attestation',
      'export',
      '--help',
    ]);
    expect(help.stdout).toMatch(/--scitt\s+.*enqueue a SCITT registration .*in the background/s);
    expect(help.stdout).not.toMatch(/register records without a receipt first/);
  }, 240_000);
});

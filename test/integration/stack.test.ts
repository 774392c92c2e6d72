import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  VersionApi,
} from '@kubernetes/client-node';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../hack/stack/stack.ts';
import { S3Client } from '../../src/blob/store.ts';
import { freshDatabaseLogins, kubeConfig, stack, uniqueName } from '../helpers/stack.ts';

const group = 'vault.service.dev';

async function versionsEnv(): Promise<Record<string, string>> {
  const text = await readFile(join(repoRoot, 'hack/versions.env'), 'utf8');
  return Object.fromEntries(
    text
      .split('\n')
      .map((l) => /^([A-Z0-9_]+)=["']?([^"'\s#]*)/.exec(l.trim()))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1]!, m[2]!]),
  );
}

describe('the local stack is real and wired', () => {
  it('serves the pinned Kubernetes version', async () => {
    const pinned = (await versionsEnv()).KUBERNETES_VERSION;
    expect(pinned).toMatch(/^v1\.\d+\.\d+$/);
    const info = await kubeConfig().makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toBe(pinned);
    expect(Number(info.minor)).toBeGreaterThanOrEqual(34);
  });

  it('has exactly the CRDs shipped in crds/ established', async () => {
    const files = (await readdir(join(repoRoot, 'crds'))).filter((f) => f.endsWith('.yaml'));
    expect(files.length).toBeGreaterThanOrEqual(2);
    const api = kubeConfig().makeApiClient(ApiextensionsV1Api);
    for (const f of files) {
      const name = /^[^_]+_(.+)\.yaml$/.exec(f)?.[1];
      const crd = await api.readCustomResourceDefinition({ name: `${name}.${group}` });
      const established = crd.status?.conditions?.find((c) => c.type === 'Established');
      expect(established?.status, f).toBe('True');
    }
  });

  it('creates and reads a Run custom resource, and the API server validates it', async () => {
    const kc = kubeConfig();
    const ns = uniqueName('stack');
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
    const api = kc.makeApiClient(CustomObjectsApi);
    const body = {
      apiVersion: `${group}/v1`,
      kind: 'Run',
      metadata: { name: 'r1' },
      spec: {
        policyPack: { name: 'baseline', version: '1.0.0' },
        inputs: { prompt: 'hello' },
        steps: [
          { id: 'summarise', model: { name: 'm', provider: 'p', version: '1', temperature: 0.2 } },
          { id: 'fetch', dependsOn: ['summarise'], tool: { name: 'curl', command: ['curl', '-s', 'x'] } },
        ],
      },
    };
    const created = (await api.createNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      body,
    })) as { metadata: { uid: string } };
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    const read = (await api.getNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'r1',
    })) as { spec: typeof body.spec };
    expect(read.spec).toEqual(body.spec);

    // A step with both model and tool breaks the CEL rule of the shipped CRD.
    const bad = structuredClone(body);
    bad.metadata.name = 'r2';
    (bad.spec.steps[0] as Record<string, unknown>).tool = { name: 't' };
    const err = await api
      .createNamespacedCustomObject({ group, version: 'v1', namespace: ns, plural: 'runs', body: bad })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiException);
    expect((err as ApiException<unknown>).code).toBe(422);
    expect(String((err as ApiException<unknown>).body)).toContain('exactly one of model or tool');
  });

  it('refuses an unprivileged user with 403 (RBAC is real)', async () => {
    const api = kubeConfig('alice').makeApiClient(CustomObjectsApi);
    const err = await api
      .listNamespacedCustomObject({ group, version: 'v1', namespace: 'default', plural: 'runs' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiException);
    expect((err as ApiException<unknown>).code).toBe(403);
    // The admin token of the same server is allowed: the 403 is an RBAC decision, not a broken server.
    const ok: unknown = await kubeConfig('admin')
      .makeApiClient(CustomObjectsApi)
      .listNamespacedCustomObject({ group, version: 'v1', namespace: 'default', plural: 'runs' });
    expect(ok).toHaveProperty('items');
  });

  it('round-trips a row through PostgreSQL 16+', async () => {
    const client = new pg.Client({ connectionString: (await freshDatabaseLogins('stack')).owner });
    await client.connect();
    try {
      const v = await client.query<{ server_version_num: string }>('show server_version_num');
      expect(Number(v.rows[0]!.server_version_num)).toBeGreaterThanOrEqual(160000);
      await client.query('create table t (id int primary key, doc jsonb not null)');
      await client.query('insert into t values ($1, $2)', [1, { hello: 'world' }]);
      const r = await client.query<{ doc: unknown }>('select doc from t where id = 1');
      expect(r.rows[0]!.doc).toEqual({ hello: 'world' });
    } finally {
      await client.end();
    }
  });

  it('puts and gets an object in the S3-compatible store', async () => {
    const { S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET } = stack().env;
    const s3 = new S3Client({ endpoint: S3_ENDPOINT!, accessKey: S3_ACCESS_KEY!, secretKey: S3_SECRET_KEY! });
    const key = `${uniqueName('stack')}/object.json`;
    const body = Buffer.from(JSON.stringify({ n: 42 }));
    await s3.putObject(S3_BUCKET!, key, body, 'application/json', { purpose: 'stack-test' });
    expect((await s3.getObject(S3_BUCKET!, key))?.equals(body)).toBe(true);
    const head = await s3.headObject(S3_BUCKET!, key);
    expect(head?.size).toBe(body.length);
    expect(head?.metadata.purpose).toBe('stack-test');
    s3.close();
  });
});

/**
 * Issue 24, connections to managed services: TLS to PostgreSQL and to the S3-compatible store with
 * a CA of their own (DATABASE_CA_FILE, S3_CA_FILE: what the chart mounts from a Secret), against the
 * real servers with a CA generated here. PostgreSQL accepts TLS connections only (hostssl); the S3
 * server (MinIO or SeaweedFS, per vitest project) serves https only. The controller runs as a real
 * process on both and records a Run; without the CA it does not get in.
 */
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverUser, startPostgres, type Postgres } from '../../../hack/stack/postgres.ts';
import { stopProcess } from '../../../hack/stack/proc.ts';
import { startS3, type S3Store } from '../../../hack/stack/s3.ts';
import { ObjectStoreError, s3BlobStore, S3Client } from '../../../src/blob/store.ts';
import { createVaultPool, migrate, withTls } from '../../../src/vault/index.ts';
import {
  aibomReady,
  startControllerProcess,
  stopAllControllers,
  testEnv,
  waitForCondition,
} from '../../helpers/controller-process.ts';
import { finishRun } from '../../helpers/failover.ts';
import { stack } from '../../helpers/stack.ts';
import { generateServerPki, type ServerPki } from '../../helpers/tls-pki.ts';

let root: string;
let pki: ServerPki;
let caFile: string;
let otherCaFile: string;
let db: Postgres;
let s3: S3Store;
const server = stack().servers?.s3 ?? 'minio';

/** pg_hba.conf accepting TCP connections over TLS only. */
const HOSTSSL_ONLY = 'local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'aibom-vault-tls-'));
  pki = await generateServerPki();
  caFile = join(root, 'ca.pem');
  otherCaFile = join(root, 'other-ca.pem');
  await writeFile(caFile, pki.ca);
  await writeFile(otherCaFile, (await generateServerPki(['127.0.0.1'], 'another CA')).ca);
  // The server's certificate and key, readable by the server user only.
  const user = await serverUser();
  const tls = join(root, 'pg-tls');
  await mkdir(tls, { mode: 0o700 });
  await writeFile(join(tls, 'server.crt'), pki.cert);
  await writeFile(join(tls, 'server.key'), pki.key, { mode: 0o600 });
  if (user) for (const f of ['', 'server.crt', 'server.key']) await chown(join(tls, f), user.uid, user.gid);
  await chmod(root, 0o711);
  db = await startPostgres(join(root, 'pg'), {}, undefined, {
    settings: { ssl: 'on', ssl_cert_file: join(tls, 'server.crt'), ssl_key_file: join(tls, 'server.key') },
  });
  await migrate(db.ownerUrl);
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ f: string }>("SELECT current_setting('hba_file') AS f");
    await writeFile(rows[0]!.f, HOSTSSL_ONLY);
    await admin.query('SELECT pg_reload_conf()');
  } finally {
    await admin.end();
  }
  s3 = await startS3(server, join(root, 's3'), stack().tools, 'aibom-vault', {}, { ...pki });
}, 180_000);

afterAll(async () => {
  await stopAllControllers();
  if (s3) await stopProcess(s3.proc.pid);
  if (db) await stopProcess(db.proc.pid);
  await rm(root, { recursive: true, force: true });
});

/** Whether the superuser's own session (made with withTls) is encrypted, and how. */
async function sslOfSession(): Promise<{ ssl: boolean; version: string | null }> {
  const c = new pg.Client(withTls(`${db.url}?sslmode=disable`, { caFile }));
  await c.connect();
  try {
    const { rows } = await c.query<{ ssl: boolean; version: string | null }>(
      'SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
    );
    return rows[0]!;
  } finally {
    await c.end();
  }
}

describe('TLS to PostgreSQL with a CA of its own (DATABASE_CA_FILE)', () => {
  it('connects over TLS with the CA, ignores the URL’s sslmode, and refuses without it or with another CA', async () => {
    // The runtime pool gets in (only TLS connections are accepted), ...
    const pool = createVaultPool(`${db.runtimeUrl}?sslmode=disable`, { tls: { caFile }, max: 1 });
    try {
      expect((await pool.query<{ n: number }>('SELECT 1 AS n')).rows[0]!.n).toBe(1);
      // ... over TLS, as the server reports for a session made the same way.
      expect(await sslOfSession()).toMatchObject({
        ssl: true,
        version: expect.stringMatching(/^TLSv1\.[23]$/) as unknown,
      });
    } finally {
      await pool.end();
    }
    const plain = createVaultPool(db.runtimeUrl, { max: 1 });
    await expect(plain.query('SELECT 1')).rejects.toThrow(/no pg_hba\.conf entry.*no encryption/);
    await plain.end();
    const other = createVaultPool(db.runtimeUrl, { tls: { caFile: otherCaFile }, max: 1 });
    await expect(other.query('SELECT 1')).rejects.toThrow(/self.signed|unable to (get|verify)|certificate/i);
    await other.end();
    // Migrations go through the same options (the owner login).
    await expect(migrate(withTls(db.ownerUrl, { caFile }))).resolves.toBeDefined();
  });
});

describe(`TLS to the S3-compatible store (${server}) with a CA of its own (S3_CA_FILE)`, () => {
  it('reaches the https endpoint with the CA and not without it', async () => {
    const store = s3BlobStore({ ...s3, ca: pki.ca, timeoutMs: 5_000 });
    await store.put('tls/probe.json', Buffer.from('{"tls":true}'), 'application/json');
    expect((await store.get('tls/probe.json'))?.toString()).toBe('{"tls":true}');
    const untrusted = s3BlobStore({ ...s3, timeoutMs: 5_000 });
    const err = await untrusted.get('tls/probe.json').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect((err as Error).message).toMatch(/self.signed|unable to (get|verify)|certificate/i);
  });
});

describe('the controller on both over TLS', () => {
  it('records a Run end to end; without DATABASE_CA_FILE it cannot start', async () => {
    const t = await testEnv('tls', null, root);
    const env = {
      DATABASE_MIGRATION_URL: db.ownerUrl,
      DATABASE_CA_FILE: caFile,
      S3_ENDPOINT: s3.endpoint,
      S3_ACCESS_KEY: s3.accessKey,
      S3_SECRET_KEY: s3.secretKey,
      S3_BUCKET: s3.bucket,
      S3_CA_FILE: caFile,
    };
    const { DATABASE_CA_FILE: _ca, ...withoutCa } = env;
    const refused = await startControllerProcess({
      ...t.opts(db.runtimeUrl),
      name: `${t.lease}-no-ca`,
      env: withoutCa,
    });
    const exit = await refused.waitExit(60_000);
    expect(exit.code).not.toBe(0);
    expect(await refused.tail(80)).toMatch(/no pg_hba\.conf entry.*no encryption/);

    const controller = await startControllerProcess({
      ...t.opts(db.runtimeUrl),
      name: `${t.lease}-tls`,
      env,
    });
    await controller.waitLeading();
    await finishRun(t.namespace, 'over-tls-1');
    const run = await waitForCondition(
      t.namespace,
      'over-tls-1',
      'AIBOMReady',
      aibomReady,
      'AIBOMReady=True over TLS',
    );
    const key = (run.status!.artifacts!.aibom as { key: string }).key;
    const client = new S3Client({ ...s3, ca: pki.ca });
    expect(await client.getObject(s3.bucket, key)).not.toBeNull();
    client.close();
  });
});

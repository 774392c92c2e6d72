/**
 * Issue 28 item 5 on the real stack: `service-ctl verify --chain` could not tell a fresh checkpoint
 * from a replayed one. `--fresh` silently fell back to GET /v1/chain/checkpoint on any answer but
 * 200, and `issued_at` was neither checked nor printed, so an old checkpoint served with the leaf
 * list it covered passed as "chain verified".
 *
 * The controller's checkpointer (as the leader runs it) signs checkpoints on request for a fresh
 * database; the sidecar app serves the chain. In front of it, a replaying proxy (what a tampering
 * middlebox or a stale cache does) answers GET /v1/chain/checkpoint with the first checkpoint (9
 * records), truncates GET /v1/chain/leaves to those 9 records, and answers POST
 * /v1/chain/checkpoint as told: a 503, or the old checkpoint with a 200.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { runCheckpointer } from '../../../src/checkpoint/checkpointer.ts';
import { verifyCheckpoint } from '../../../src/checkpoint/statement.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const ns = uniqueName('chain-fresh');
let vault: Vault;
let signer: KeySigner;
let app: FastifyInstance;
let apiUrl: string;
let proxy: Server;
let proxyUrl: string;
let token: string;
let keyFile: string;
const stop = new AbortController();
let checkpointer: Promise<void>;
/** The first checkpoint as GET /v1/chain/checkpoint served it (9 records): what the proxy replays. */
let old: { tree_size: number; statement: string; root_hash: string };
let oldIssuedAt: number;
/** How the proxy answers POST /v1/chain/checkpoint. */
let postMode: 'unavailable' | 'replay' = 'unavailable';

async function chainVerifierToken(): Promise<string> {
  const kc = kubeConfig('admin');
  const name = 'chain-verifier';
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: `${ns}-chain-verifier` },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'aibom-vault-chain-verifier',
      },
      subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
    },
  });
  const tr = await kc
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({ name, namespace: ns, body: { spec: { audiences: [] } } });
  return tr.status!.token!;
}

async function requestCheckpoint(): Promise<{ tree_size: number; statement: string; root_hash: string }> {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/chain/checkpoint?wait=30',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Forwards a request to the app and hands its JSON answer to `edit` (null: pass it through). */
function forward(req: IncomingMessage, res: ServerResponse, edit: ((body: unknown) => unknown) | null): void {
  const target = new URL(req.url!, apiUrl);
  const out = request(target, { method: req.method, headers: req.headers }, (upstream) => {
    const parts: Buffer[] = [];
    upstream.on('data', (c: Buffer) => parts.push(c));
    upstream.on('end', () => {
      const body = Buffer.concat(parts);
      if (edit === null || upstream.statusCode !== 200) {
        res.writeHead(upstream.statusCode ?? 502, upstream.headers);
        res.end(body);
      } else {
        send(res, 200, edit(JSON.parse(body.toString('utf8'))));
      }
    });
  });
  req.pipe(out);
}

/** The replaying middlebox: yesterday's checkpoint, the leaf list it covered, and POST as told. */
function replayProxy(req: IncomingMessage, res: ServerResponse): void {
  const path = new URL(req.url!, 'http://x').pathname;
  if (path === '/v1/chain/checkpoint' && req.method === 'POST') {
    req.resume();
    if (postMode === 'replay') send(res, 200, old);
    else
      send(res, 503, { type: 'about:blank', title: 'Service Unavailable', status: 503, code: 'UNAVAILABLE' });
    return;
  }
  if (path === '/v1/chain/checkpoint') return forward(req, res, () => old);
  if (path === '/v1/chain/leaves') {
    return forward(req, res, (body) => {
      const page = body as { items: { seq: number }[] };
      return {
        items: page.items.filter((i) => i.seq <= old.tree_size),
        head_seq: old.tree_size,
        next_after_seq: null,
      };
    });
  }
  forward(req, res, null);
}

beforeAll(async () => {
  const db = await freshDatabaseLogins('chainfresh');
  vault = await openVault(createVaultPool(db.runtime));
  signer = signerFromPem(await generateDevPki());
  token = await chainVerifierToken();
  for (let i = 0; i < 3; i++) await vault.attestations.append(runRecords(signer, ns).records);
  // The leader's checkpointer: on request only (a long interval).
  checkpointer = runCheckpointer(
    {
      vault,
      signer,
      caCertificates: signer.caCertificates,
      intervalMs: 3_600_000,
      logger: pino({ level: 'silent' }),
    },
    stop.signal,
  );
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  proxy = createServer(replayProxy);
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  keyFile = `${stack().root}/chain-fresh-key-${ns}.pem`;
  await writeFile(keyFile, signer.publicKey.export({ type: 'spki', format: 'pem' }));

  old = await requestCheckpoint();
  expect(old.tree_size).toBe(9);
  oldIssuedAt = Date.parse(
    verifyCheckpoint(Buffer.from(old.statement, 'base64'), { publicKeys: [signer.publicKey] }).issuedAt,
  );
  // The vault moves on: three more records and a checkpoint of all 12.
  await vault.attestations.append(runRecords(signer, ns).records);
  expect((await requestCheckpoint()).tree_size).toBe(12);
  // The replayed checkpoint must be older than the 1 s --max-age below (its time is signed).
  await waitFor('the first checkpoint to be 2 s old', () =>
    Promise.resolve(Date.now() - oldIssuedAt > 2_000 ? true : undefined),
  );
}, 120_000);

afterAll(async () => {
  stop.abort();
  await checkpointer;
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
  await app?.close();
  await vault?.close();
});

const service = (url: string, args: string[]) =>
  promisify(execFile)(process.execPath, [
    `${repoRoot}/src/bin/service-ctl.ts`,
    'verify',
    '--chain',
    '--key',
    keyFile,
    ...args,
    '--api-url',
    url,
    '--token',
    token,
  ]).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

const AGE = /^OK {4}checkpoint of (\d+) records signed \(sha256:[0-9a-f]+\), issued (\S+), (.+) ago$/m;

describe('verify --chain against a replayed checkpoint and a truncated leaf list', () => {
  it('without --fresh or --max-age: the 9 replayed records still fold, and the checkpoint says how old it is', async () => {
    const r = await service(proxyUrl, []);
    expect(r.stdout).toContain('9 records, gapless, fold to the signed root');
    const m = AGE.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    expect(m![1]).toBe('9');
    expect(Date.parse(m![2]!)).toBe(oldIssuedAt);
    expect(r.code).toBe(0);
  });

  it('--fresh answered 503: CHECKPOINT_NOT_FRESH, no fallback to the replayed checkpoint', async () => {
    postMode = 'unavailable';
    const r = await service(proxyUrl, ['--fresh']);
    expect(r.stdout).toMatch(/^FAIL {2}CHECKPOINT_NOT_FRESH: asking for a new checkpoint was answered 503/m);
    expect(r.stdout).not.toContain('fold to the signed root');
    expect(r.stdout).toContain('chain NOT verified (1 problem(s))');
    expect(r.code).toBe(1);
  });

  it('--max-age refuses the replayed checkpoint, served by GET or as the answer to --fresh', async () => {
    for (const args of [
      ['--max-age', '1s'],
      ['--fresh', '--max-age', '1s'],
    ]) {
      postMode = 'replay';
      const r = await service(proxyUrl, args);
      expect(r.stdout, args.join(' ')).toMatch(
        /^FAIL {2}CHECKPOINT_STALE: the checkpoint was issued at \S+, .+ ago: older than --max-age 1 s$/m,
      );
      expect(r.code).toBe(1);
    }
  });

  it('the service itself, --fresh --max-age 1h: a checkpoint of all 12 records, its age printed, verified', async () => {
    const r = await service(apiUrl, ['--fresh', '--max-age', '1h']);
    const m = AGE.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    expect(m![1]).toBe('12');
    expect(r.stdout).toContain('12 records, gapless, fold to the signed root');
    expect(r.stdout).toContain('chain verified');
    expect(r.code).toBe(0);
  });

  it('--max-age that is no duration, or without --chain: usage errors', async () => {
    const bad = await service(apiUrl, ['--max-age', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--max-age soon: not a duration');
    const loose = await promisify(execFile)(process.execPath, [
      `${repoRoot}/src/bin/service-ctl.ts`,
      'verify',
      keyFile,
      '--max-age',
      '1h',
      '--key',
      keyFile,
    ]).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(loose.code).toBe(2);
    expect(loose.stderr).toContain('--fresh and --max-age apply to --chain');
  });
});

/**
 * Capability chains on the real stack: the sample Run (three steps, one with a two-link chain)
 * driven to Succeeded by the controller; each step's chain (grantedBy → approvedBy) shows in the
 * API and in `service-ctl verify`; the query's capability_token filter takes a token, its id or a
 * scope, and refuses malformed, expired and foreign tokens with a code; admission refuses a
 * widening delegation and an invalid approver; switching the projection off removes the field.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { Run } from '../../../src/crd/run.ts';
import { type CapabilityPredicate } from '../../../src/attest/index.ts';
import { biscuitRootKey } from '../../../src/capability/biscuit.ts';
import { mintGrants } from '../../../src/capability/mint.ts';
import type { RunningController } from '../../../src/controller/manager.ts';
import { startTestController } from '../../helpers/controller.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type StoredAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { freshDatabase, kubeConfig, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

const exec = promisify(execFile);
const ns = uniqueName('caps');
const group = 'vault.service.dev';
let dbUrl: string;
let vault: Vault;
let signer: KeySigner;
let controller: RunningController;
let app: FastifyInstance;
let apiUrl: string;
let dir: string;
let runId: string;

const runs = () => kubeConfig('admin').makeApiClient(CustomObjectsApi);
const token = () => stack().kube.tokens.admin;

interface Envelope {
  id: string;
  kind: string;
  step_id: string | null;
  created_at: string;
  capability_chain:
    | { capability: string; links: { scope: string; granted_by: string; approved_by: string | null }[] }[]
    | null;
  capability_tokens?: { format: string; id: string; token: string }[];
}

async function query(body: Record<string, unknown>, a: FastifyInstance = app) {
  const res = await a.inject({
    method: 'POST',
    url: '/v1/attestations/query',
    headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json' },
    payload: { namespaces: [ns], ...body },
  });
  return { status: res.statusCode, body: res.json<{ items: Envelope[]; code?: string }>() };
}

async function cli(args: string[]) {
  return exec(process.execPath, [`${repoRoot}/src/bin/service-ctl.ts`, ...args], {
    env: { ...process.env, SERVICE_API_URL: apiUrl, SERVICE_TOKEN: token() },
  }).then(
    (r) => ({ code: 0, out: r.stdout }),
    (e: { code?: number; stdout?: string }) => ({ code: e.code ?? 1, out: e.stdout ?? '' }),
  );
}

async function createRun(name: string, mutate: (r: Run) => void = () => {}): Promise<Run> {
  const sample = parseYaml(await readFile(`${repoRoot}/manifests/samples/run.yaml`, 'utf8')) as Run;
  sample.metadata = { ...sample.metadata, name, namespace: ns };
  mutate(sample);
  return (await runs().createNamespacedCustomObject({
    group,
    version: 'v1',
    namespace: ns,
    plural: 'runs',
    body: sample,
  })) as Run;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'caps-'));
  dbUrl = await freshDatabase('caps');
  await migrate(dbUrl);
  vault = await openVault(createVaultPool(dbUrl));
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  controller = startTestController({
    vault,
    signer,
    leasePrefix: 'caps',
    watchNamespace: ns,
  });
  app = await stackApp(vault, signer.caCertificates);
  await app.listen({ host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  runId = (await createRun('sample')).metadata.uid;
  await driveRun(kubeConfig('admin'), ns, 'sample');
  await waitFor('AIBOMReady', async () => {
    const r = (await runs().getNamespacedCustomObject({
      group,
      version: 'v1',
      namespace: ns,
      plural: 'runs',
      name: 'sample',
    })) as Run;
    return r.status?.conditions?.find((c) => c.type === 'AIBOMReady')?.status === 'True' ? r : undefined;
  });
});

afterAll(async () => {
  await controller?.stop();
  await app?.close();
  await vault?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const EXPECTED = {
  retrieve: [
    { scope: 'kb', granted_by: 'org:acme-it', approved_by: 'user:ciso' },
    { scope: 'kb:read', granted_by: 'team:support-platform', approved_by: 'user:alice' },
  ],
  summarise: [
    { scope: 'model:invoke', granted_by: 'team:support-platform', approved_by: 'user:security-oncall' },
  ],
  'post-comment': [
    { scope: 'tickets:comment', granted_by: 'team:support-platform', approved_by: 'user:support-lead' },
  ],
};

describe('the sample Run', () => {
  it("shows each step's chain (grantedBy → approvedBy) and its VC and Biscuit tokens in the API", async () => {
    const { status, body } = await query({ run_id: runId, kind: 'step' });
    expect(status).toBe(200);
    expect(body.items).toHaveLength(3);
    for (const step of body.items) {
      const chains = step.capability_chain!;
      expect(chains, step.step_id!).toHaveLength(1);
      expect(chains[0]!.links).toEqual(EXPECTED[step.step_id as keyof typeof EXPECTED]);
      expect(step.capability_tokens?.map((t) => t.format)).toEqual(['vc+jwt', 'biscuit']);
    }
    const caps = await query({ run_id: runId, kind: 'capability' });
    expect(caps.body.items).toHaveLength(3);
    for (const c of caps.body.items) expect(c.capability_tokens).toHaveLength(2);
  });

  it('verifies offline with service-ctl verify, printing who approved which step under which scope', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/attestations/query',
      headers: {
        authorization: `Bearer ${token()}`,
        'content-type': 'application/json',
        accept: 'application/x-ndjson',
      },
      payload: { namespaces: [ns], run_id: runId },
    });
    const file = join(dir, 'records.ndjson');
    await writeFile(file, res.body);
    const pem = join(dir, 'signer.pem');
    await writeFile(pem, signer.publicKey.export({ type: 'spki', format: 'pem' }));
    const out = await cli(['verify', file, '--key', pem]);
    expect(out.code, out.out).toBe(0);
    const step = (id: string) => `step:${runId}:${id}`;
    expect(out.out).toContain(
      `${step('retrieve')} under kb:read: kb granted by org:acme-it, approved by user:ciso → kb:read granted by team:support-platform, approved by user:alice`,
    );
    expect(out.out).toContain(
      `${step('summarise')} under model:invoke: model:invoke granted by team:support-platform, approved by user:security-oncall`,
    );
    expect(out.out).toContain(
      `${step('post-comment')} under tickets:comment: tickets:comment granted by team:support-platform, approved by user:support-lead`,
    );
    // One line per chain on the capability record and one on the step record it authorised.
    expect(out.out.match(/^CHAIN /gm)).toHaveLength(6);
    expect(out.out).toMatch(/vc\+jwt, biscuit verified/);

    // A tampered token fails verification with a code.
    const lines = res.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Envelope);
    const cap = lines.find((l) => l.kind === 'capability')!;
    const t = cap.capability_tokens![0]!;
    const mid = Math.floor(t.token.length / 2);
    t.token = t.token.slice(0, mid) + (t.token[mid] === 'A' ? 'B' : 'A') + t.token.slice(mid + 1);
    const bad = join(dir, 'tampered.json');
    await writeFile(bad, JSON.stringify(cap));
    const failed = await cli(['verify', bad, '--key', pem]);
    expect(failed.code).toBe(1);
    expect(failed.out).toMatch(/FAIL .* TOKEN_(SIGNATURE_INVALID|MALFORMED|UNTRUSTED): vc\+jwt/);
  });
});

describe('the capability_token query filter', () => {
  let capability: Envelope;
  let stepRecord: Envelope;
  const ids = (items: Envelope[]) => items.map((i) => i.id).sort();

  beforeAll(async () => {
    const { body } = await query({ run_id: runId, step_id: 'retrieve' });
    capability = body.items.find((i) => i.kind === 'capability')!;
    stepRecord = body.items.find((i) => i.kind === 'step')!;
  });

  it('finds the capability and the step it authorised by VC, Biscuit, token id, capability id and scope', async () => {
    const expected = ids([capability, stepRecord]);
    const forms = [
      ...capability.capability_tokens!.map((t) => t.token),
      ...capability.capability_tokens!.map((t) => t.id),
      capability.capability_chain![0]!.capability,
      'kb:read',
    ];
    for (const form of forms) {
      const { status, body } = await query({ capability_token: form });
      expect(status, form.slice(0, 40)).toBe(200);
      expect(ids(body.items), form.slice(0, 40)).toEqual(expected);
    }
    // A scope no step was granted exactly, and an unknown id: nothing, not an error.
    expect((await query({ capability_token: 'kb' })).body.items).toEqual([]);
    expect((await query({ capability_token: `urn:aibom-vault:vc:${runId}` })).body.items).toEqual([]);
  });

  it('refuses a malformed, a tampered, a foreign-signed and an expired token with a code', async () => {
    const vc = capability.capability_tokens!.find((t) => t.format === 'vc+jwt')!.token;
    const biscuit = capability.capability_tokens!.find((t) => t.format === 'biscuit')!.token;
    const flip = (s: string) => {
      const at = Math.floor(s.length / 2);
      return s.slice(0, at) + (s[at] === 'A' ? 'B' : 'A') + s.slice(at + 1);
    };
    const flipByte = (token: string, at: number) => {
      const bytes = Buffer.from(token, 'base64url');
      bytes[bytes.length + at]! ^= 1;
      return bytes.toString('base64url');
    };
    // Tokens for the same records, minted by another key and with a lifetime already over.
    const stored = (await vault.attestations.get(capability.id))!;
    const step = (await vault.attestations.get(stepRecord.id))!;
    const statement = JSON.parse(Buffer.from(stored.envelope.payload, 'base64').toString('utf8')) as {
      predicate: CapabilityPredicate;
    };
    const predicate = statement.predicate;
    const other = signerFromPem(await generateDevPki());
    const mint = async (s: KeySigner, record: StoredAttestation, lifetimeMs?: number) =>
      (
        await mintGrants(s, [{ record, predicate }], step, {
          tokens: true,
          ...(lifetimeMs ? { lifetimeMs } : {}),
        })
      )[0]!.tokens;
    const foreign = await mint(other, stored);
    const expired = await mint(signer, { ...stored, createdAt: new Date('2020-01-01T00:00:00Z') }, 1000);
    const cases: [string, string][] = [
      ['not a token', 'CAPABILITY_TOKEN_MALFORMED'],
      ['a.b.c', 'CAPABILITY_TOKEN_MALFORMED'],
      [flip(vc), 'CAPABILITY_TOKEN_UNTRUSTED'],
      // A changed proof byte breaks the signature chain; a truncated token is not a Biscuit at all.
      [flipByte(biscuit, -10), 'CAPABILITY_TOKEN_UNTRUSTED'],
      [biscuit.slice(0, -40), 'CAPABILITY_TOKEN_MALFORMED'],
      [foreign[0]!.token, 'CAPABILITY_TOKEN_UNTRUSTED'],
      [foreign[1]!.token, 'CAPABILITY_TOKEN_UNTRUSTED'],
      [expired[0]!.token, 'CAPABILITY_TOKEN_EXPIRED'],
      [expired[1]!.token, 'CAPABILITY_TOKEN_EXPIRED'],
    ];
    for (const [value, code] of cases) {
      const res = await query({ capability_token: value });
      expect(res.status, `${code} ${value.slice(0, 30)}`).toBe(400);
      expect(res.body.code, value.slice(0, 30)).toBe(code);
    }
  });
  it("refuses a VC signed by another grant's root that names this grant's credential id", async () => {
    // Tenant B: a namespace the caller also reads, holding one grant signed by B's own key, so
    // B's key is among the root keys the filter tries. B mints a VC for A's capability record:
    // its `id` is A's credential id (ids are the record's vault id), its signature is B's.
    const nsB = uniqueName('caps-b');
    await createNamespace(nsB);
    const other = signerFromPem(await generateDevPki());
    const superuser = new URL(stack().database.superuser);
    superuser.pathname = new URL(dbUrl).pathname;
    const db = new pg.Client({ connectionString: superuser.toString() });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO capability_grants (capability_attestation_id, step_attestation_id, namespace,
           capability_id, chain, public_key, biscuit_root_key)
         VALUES ($1, $2, $3, 'capability:b:b:0', '{}', $4, $5)`,
        [
          randomUUID(),
          randomUUID(),
          nsB,
          other.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
          await biscuitRootKey(other),
        ],
      );
    } finally {
      await db.end();
    }
    const stored = (await vault.attestations.get(capability.id))!;
    const step = (await vault.attestations.get(stepRecord.id))!;
    const { predicate } = JSON.parse(Buffer.from(stored.envelope.payload, 'base64').toString('utf8')) as {
      predicate: CapabilityPredicate;
    };
    const [forgedVc, forgedBiscuit] = (
      await mintGrants(other, [{ record: stored, predicate }], step, {
        tokens: true,
      })
    )[0]!.tokens;
    const real = capability.capability_tokens!.find((t) => t.format === 'vc+jwt')!;
    expect(forgedVc!.id).toBe(real.id);

    const both = { namespaces: [ns, nsB] };
    const forged = await query({ ...both, capability_token: forgedVc!.token });
    expect(forged.status).toBe(400);
    expect(forged.body.code).toBe('CAPABILITY_TOKEN_UNTRUSTED');
    expect(forged.body.items).toBeUndefined();
    // B's Biscuit has its own revocation id, held by no grant: nothing, and never A's records.
    const biscuit = await query({ ...both, capability_token: forgedBiscuit!.token });
    expect(biscuit.status).toBe(200);
    expect(biscuit.body.items).toEqual([]);
    // A's own token still finds A's records with B's namespace in the query.
    const genuine = await query({ ...both, capability_token: real.token });
    expect(genuine.status).toBe(200);
    expect(ids(genuine.body.items)).toEqual(ids([capability, stepRecord]));
  });
});

describe('recording', () => {
  it('stores nothing of a batch whose tokens cannot be minted (records, claim and grants roll back together)', async () => {
    const { runRecords } = await import('../../helpers/records.ts');
    const { records } = runRecords(signer, ns);
    const key = `step:${randomBytes(4).toString('hex')}`;
    await expect(
      vault.claims.append(key, records, { grants: () => Promise.reject(new Error('minting failed')) }),
    ).rejects.toThrow('minting failed');
    expect(await vault.claims.get(key)).toBeNull();
    for (const r of records) {
      const found = await vault.attestations.query({ namespaces: [ns], subject: r.subjects[0]! });
      expect(found.items.filter((i) => i.digest === r.digest)).toEqual([]);
    }
  });
});

describe('SERVICE_CAPABILITY_TOKENS=0', () => {
  it('removes capability_tokens from every envelope, keeping the chains', async () => {
    const off = await openVault(createVaultPool(dbUrl), { capabilityTokens: false });
    const offApp = await stackApp(off, signer.caCertificates);
    try {
      const { body } = await query({ run_id: runId }, offApp);
      expect(body.items.length).toBeGreaterThan(0);
      for (const item of body.items) expect(item).not.toHaveProperty('capability_tokens');
      expect(body.items.filter((i) => i.kind === 'step').every((i) => i.capability_chain!.length === 1)).toBe(
        true,
      );
    } finally {
      await offApp.close();
      await off.close();
    }
  });
});

describe('admission', () => {
  it('refuses a delegation that widens a scope, and an approver that is not a principal', async () => {
    const refused = async (mutate: (r: Run) => void) =>
      createRun(uniqueName('bad'), mutate).then(
        () => '',
        (e: { body?: string }) => String(e.body),
      );
    const widen = await refused((r) => {
      r.spec.steps[0]!.capabilities![0]!.delegatedFrom = [
        { scope: 'kb:read:draft', grantedBy: 'org:acme-it' },
      ];
    });
    expect(widen).toMatch(/widens the scope kb:read:draft/);
    const widenInside = await refused((r) => {
      r.spec.steps[0]!.capabilities![0]!.delegatedFrom = [
        { scope: 'kb:read', grantedBy: 'org:acme-it' },
        { scope: 'kb', grantedBy: 'org:acme-kb' },
      ];
    });
    expect(widenInside).toMatch(/a delegation widens a scope/);
    const approver = await refused((r) => {
      r.spec.steps[0]!.capabilities![0]!.approvedBy = 'alice';
    });
    expect(approver).toMatch(/approvedBy/);
  });
});

import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../../src/cli/main.ts';
import { signerEntry } from '../../../src/export/keys.ts';
import { ROTATION_GRACE_MS, signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import type { NewAttestation } from '../../../src/vault/index.ts';
import { recordsBundle } from '../../helpers/export.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { runRecords } from '../../helpers/records.ts';

/**
 * `service-ctl verify --trust-bundle trust-bundle.json` (what `service-ctl keys fetch` saves): each
 * record is verified with the chain its `cert_chain_ref` names in the bundle, so records of a
 * rotated key verify next to the new key's; and the bundle's history (every signer with its first
 * use) refuses a record signed with a key that had been rotated away before it was signed.
 */
let dir: string;
let before: KeySigner;
let after: KeySigner;
let tenant: KeySigner;
const DAY = 24 * 3600_000;
/** When the service's second key was first used: the rotation, a month ago. */
const rotatedAt = new Date(Date.now() - 30 * DAY);

function entry(signer: KeySigner, namespace: string, firstUsedAt: Date) {
  const e = signerEntry(signer, { namespace, role: 'signer' });
  return {
    cert_chain_ref: e.certRef,
    key_id: e.keyId,
    namespace,
    role: 'signer',
    chain_pem: e.chainPem,
    ca_pem: e.caPem,
    not_before: null,
    not_after: null,
    first_used_at: firstUsedAt.toISOString(),
  };
}

/** A record as the API serves it (the fields the verifier reads), stored at `createdAt`. */
function apiRecord(n: NewAttestation, createdAt: Date): Record<string, unknown> {
  return {
    id: randomUUID(),
    namespace: n.namespace,
    kind: n.kind,
    run_id: n.runId ?? null,
    step_id: n.stepId ?? null,
    subjects: n.subjects,
    predicate_type: n.predicateType,
    created_at: createdAt.toISOString(),
    envelope: n.envelope,
    digest: n.digest,
    signature: n.signature,
  };
}

async function verify(
  name: string,
  records: object[] | Buffer,
  trust = join(dir, 'trust-bundle.json'),
): Promise<{ code: number; out: string }> {
  const file = join(dir, Buffer.isBuffer(records) ? `${name}.tar` : `${name}.json`);
  await writeFile(file, Buffer.isBuffer(records) ? records : JSON.stringify(records));
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    out += String(chunk);
    return true;
  });
  try {
    const code = await main(['verify', file, '--trust-bundle', trust]);
    return { code, out };
  } finally {
    spy.mockRestore();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'verify-history-'));
  // Certificates valid for the whole story (a year back, a year ahead): only the history decides.
  const window = { notBefore: new Date(Date.now() - 365 * DAY), notAfter: new Date(Date.now() + 365 * DAY) };
  const ca = { caNotBefore: window.notBefore, caNotAfter: new Date(Date.now() + 3650 * DAY) };
  const at = { at: new Date() };
  before = signerFromPem(await generateDevPki({ ...window, ...ca }), at);
  after = signerFromPem(await generateDevPki({ ...window, ...ca, caCommonName: 'renewed CA' }), at);
  tenant = signerFromPem(await generateDevPki({ ...window, ...ca, caCommonName: 'tenant CA' }), at);
  const bundle = {
    trust_anchors_pem: [...before.caCertificates, ...after.caCertificates].map((c) => c.toString()).join(''),
    tsa_trust_anchors_pem: '',
    signers: [
      entry(before, '', new Date(rotatedAt.getTime() - 30 * DAY)),
      entry(after, '', rotatedAt),
      // A tenant's own key, first used after the rotation, in its own scope.
      entry(tenant, 'team-x', new Date(rotatedAt.getTime() + 3600_000)),
    ],
    log_keys: { cose_key_set: '' },
  };
  await writeFile(join(dir, 'trust-bundle.json'), JSON.stringify(bundle));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const minutes = (n: number) => new Date(rotatedAt.getTime() + n * 60_000);

describe('service-ctl verify --trust-bundle', () => {
  it("verifies each record with its own signer's chain: records of both keys, and a tenant's key", async () => {
    const records = [
      ...runRecords(before, 'team-a').records.map((r) => apiRecord(r, minutes(-60))),
      ...runRecords(after, 'team-a').records.map((r) => apiRecord(r, minutes(60))),
      ...runRecords(tenant, 'team-x').records.map((r) => apiRecord(r, minutes(120))),
    ];
    const { code, out } = await verify('mixed', records);
    expect(out).toContain('9 verified, 0 failed');
    expect(code).toBe(0);
  });

  it('KEY_ROTATED: a record signed with the old key after the new key replaced it, beyond the grace', async () => {
    const late = runRecords(before, 'team-a').records.map((r) =>
      apiRecord(r, minutes(ROTATION_GRACE_MS / 60_000 + 10)),
    );
    const { code, out } = await verify('late', late);
    expect(code).toBe(1);
    expect(out).toContain('0 verified, 3 failed');
    expect(
      out.split('\n').filter((l) => / KEY_ROTATED: key sha256:[0-9a-f]+ was rotated away at /.test(l)),
    ).toHaveLength(3);
    // Within the grace (replicas see a renewal seconds apart), the same key is still accepted.
    const inFlight = runRecords(before, 'team-a').records.map((r) => apiRecord(r, minutes(1)));
    expect(await verify('in-flight', inFlight)).toMatchObject({ code: 0 });
  });

  it('UNKNOWN_CERTIFICATE: a record naming a certificate the service never used', async () => {
    const stranger = signerFromPem(await generateDevPki(), { at: new Date() });
    const { code, out } = await verify(
      'stranger',
      runRecords(stranger, 'team-a')
        .records.slice(0, 1)
        .map((r) => apiRecord(r, minutes(0))),
    );
    expect(code).toBe(1);
    expect(out).toMatch(
      /FAIL .* UNKNOWN_CERTIFICATE: certificate sha256:[0-9a-f]+ is not in the trust bundle/,
    );
  });

  it("an export bundle: the trust bundle's CAs, not SERVICE_TRUST_ANCHOR from the environment", async () => {
    const bundleBytes = await recordsBundle(after, 'team-a', { createdAt: (i) => minutes(60 + i) });
    // An unrelated CA in the environment: the trust bundle given on the command line wins.
    const foreign = join(dir, 'foreign-ca.pem');
    await writeFile(foreign, (await generateDevPki())['ca.crt']);
    vi.stubEnv('SERVICE_TRUST_ANCHOR', foreign);
    try {
      const { code, out } = await verify('bundle', bundleBytes);
      expect(out).toContain('bundle verified (3 attestations');
      expect(code).toBe(0);
      // The directory `service-ctl keys fetch --out DIR` wrote, as help and examples name it.
      const viaDir = await verify('bundle-dir', bundleBytes, dir);
      expect(viaDir.out).toContain('bundle verified (3 attestations');
      expect(viaDir.code).toBe(0);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

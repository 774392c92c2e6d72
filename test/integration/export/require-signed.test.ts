/**
 * SERVICE_REQUIRE_SIGNED_EXPORTS as the sidecar process reads it (issue 22 item 10): the sidecar's
 * own wiring (src/bin/sidecar-process.ts, what the entry point runs) in-process on the real stack,
 * once per value: `1`, `0`, and unset (the default, `1`). An AIBOM stored without a signed C2PA
 * manifest (the signer has not produced one) is refused with 409 UNSIGNED_EXPORT_BLOCKED under `1`
 * and leaves under `0`; records without an AIBOM leave under both. The chart side (managed: true
 * forces `1`) is test/integration/helm.test.ts.
 */
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { aibomStatement } from '../../../src/attest/index.ts';
import type { Stop } from '../../../src/bin/lifecycle.ts';
import { startSidecarProcess } from '../../../src/bin/sidecar-process.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { createLogger } from '../../../src/log/index.ts';
import { sealRecord } from '../../../src/recorder/index.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import { tarEntries } from '../../helpers/export.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, stack, uniqueName } from '../../helpers/stack.ts';

const ns = uniqueName('require-signed');
const stops: Stop[] = [];
const sidecars = new Map<string, string>();
/** Each sidecar's error lines (a failed assertion shows them). */
const errors = new Map<string, string[]>();
let vault: Vault;
let aibomId: string;

/** Starts the sidecar process with SERVICE_REQUIRE_SIGNED_EXPORTS = `value` (undefined: unset). */
async function sidecar(db: { runtime: string; owner: string }, value: string | undefined): Promise<string> {
  const s = stack();
  const env: Record<string, string | undefined> = {
    ...s.settings,
    ...s.env,
    DATABASE_URL: db.runtime,
    DATABASE_MIGRATION_URL: db.owner,
    POD_NAMESPACE: 'aibom-vault-system',
    KUBECONFIG: s.kube.kubeconfigs['aibom-vault-api'],
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: '0',
  };
  delete env.SERVICE_REQUIRE_SIGNED_EXPORTS;
  if (value !== undefined) env.SERVICE_REQUIRE_SIGNED_EXPORTS = value;
  const lines: string[] = [];
  const logger = createLogger('sidecar', 'info', { write: (l: string) => void lines.push(l) });
  errors.set(String(value), lines);
  stops.push(await startSidecarProcess(loadConfig('sidecar', env), logger));
  const listening = lines
    .map((l) => JSON.parse(l) as { msg: string; address?: string; requireSignedExports?: boolean })
    .find((l) => l.msg === 'sidecar listening')!;
  // The process says which it enforces, as its configuration read it.
  expect(listening.requireSignedExports).toBe(value !== '0');
  return listening.address!;
}

beforeAll(async () => {
  const db = await freshDatabaseLogins('require_signed');
  await createNamespace(ns);
  vault = await openVault(createVaultPool(db.runtime));
  const signer = signerFromPem(await generateDevPki());
  // A run's records, and an AIBOM stored without a C2PA manifest.
  await vault.attestations.append(runRecords(signer, ns).records);
  const runId = randomUUID();
  const key = `runs/${ns}/${runId}/aibom.json`;
  const bom = {
    bom_format: 'CycloneDX',
    spec_version: '1.5',
    serial_number: `urn:uuid:${randomUUID()}`,
    metadata: { run_id: runId, status: 'succeeded', policy_pack: 'baseline', policy_pack_version: '1.0.0' },
    components: { models: [], tools: [], policies: [] },
    trust: { subjects: [`run:${runId}`], attestation_ids: [] },
  };
  const bytes = Buffer.from(JSON.stringify(bom));
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  await stackBlobs().put(key, bytes, 'application/json');
  // A signed AIBOM record whose artifact has no C2PA manifest (the signer has not produced one).
  const record = sealRecord(aibomStatement({ runId, bom, sha256 }), signer, {
    namespace: ns,
    kind: 'aibom',
    runId,
    policyPack: { name: 'baseline', version: '1.0.0' },
  });
  const [aibom] = await vault.claims.append(`aibom:${runId}`, [record], {
    artifact: (inserted) => ({
      runId,
      kind: 'aibom',
      namespace: ns,
      objectKey: key,
      digest: `sha256:${sha256}`,
      metadata: { key, aibom_attestation_id: inserted[0]!.id },
    }),
  });
  aibomId = aibom!.id;
  for (const value of ['1', '0', undefined]) sidecars.set(String(value), await sidecar(db, value));
}, 120_000);

afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  await vault?.close();
});

const exportFrom = (base: string, body: object): Promise<Response> =>
  fetch(`${base}/v1/attestations/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack().kube.tokens.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('SERVICE_REQUIRE_SIGNED_EXPORTS', () => {
  it.each([
    ['1', '1'],
    ['unset (the default)', 'undefined'],
  ])('%s: an AIBOM without a signed manifest does not leave (409 UNSIGNED_EXPORT_BLOCKED)', async (_l, k) => {
    const res = await exportFrom(sidecars.get(k)!, { namespaces: [ns] });
    expect(res.status).toBe(409);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await res.json()) as { code: string }).code).toBe('UNSIGNED_EXPORT_BLOCKED');
    const steps = await exportFrom(sidecars.get(k)!, { namespaces: [ns], kind: 'step' });
    expect(steps.status).toBe(200);
    await steps.arrayBuffer();
  });

  it('0: the same export leaves, the unsigned AIBOM record in it', async () => {
    const res = await exportFrom(sidecars.get('0')!, { namespaces: [ns] });
    expect(
      res.status,
      errors
        .get('0')!
        .filter((l) => /"level":(40|50|60)/.test(l))
        .join('\n'),
    ).toBe(200);
    const entries = await tarEntries(Buffer.from(await res.arrayBuffer()));
    expect(entries.map((e) => e.path)).toContain('bundle.c2pa');
    // The AIBOM record is in the bundle (it names its id).
    expect(entries.some((e) => e.content.includes(aibomId))).toBe(true);
  });
});

import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleVerifier, trustBundleOf, type TrustBundle } from '../../../src/attest/trust-bundle.ts';
import { signerEntry } from '../../../src/export/keys.ts';
import { verifyBundle } from '../../../src/export/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import type { NewAttestation } from '../../../src/vault/index.ts';
import { recordsBundle } from '../../helpers/export.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { runRecords } from '../../helpers/records.ts';

/**
 * A trust bundle trusts a signer within its scope only: the service's key for every namespace, a
 * tenant's customer key for its own namespace. A tenant holding its key must not be able to mint
 * records (capability approvals included) that verify as another tenant's, neither record by record
 * (`verify --trust-bundle`, the web UI) nor inside an export bundle verified with the history.
 */
let service: KeySigner;
let keyA: KeySigner;
let keyB: KeySigner;
let bundle: TrustBundle;
const DAY = 24 * 3600_000;
const firstUse = new Date(Date.now() - 30 * DAY);

function entry(signer: KeySigner, namespace: string) {
  const e = signerEntry(signer, { namespace, role: 'signer' });
  return {
    cert_chain_ref: e.certRef,
    key_id: e.keyId,
    namespace,
    role: 'signer',
    chain_pem: e.chainPem,
    ca_pem: e.caPem,
    first_used_at: firstUse.toISOString(),
  };
}

function apiRecord(n: NewAttestation): Record<string, unknown> {
  return {
    namespace: n.namespace,
    kind: n.kind,
    run_id: n.runId ?? null,
    step_id: n.stepId ?? null,
    subjects: n.subjects,
    predicate_type: n.predicateType,
    created_at: new Date(firstUse.getTime() + DAY).toISOString(),
    envelope: n.envelope,
    digest: n.digest,
    signature: n.signature,
  };
}

beforeAll(async () => {
  const window = { notBefore: new Date(Date.now() - 365 * DAY), notAfter: new Date(Date.now() + 365 * DAY) };
  const ca = { caNotBefore: window.notBefore, caNotAfter: new Date(Date.now() + 3650 * DAY) };
  const at = { at: new Date() };
  service = signerFromPem(await generateDevPki({ ...window, ...ca, caCommonName: 'service CA' }), at);
  keyA = signerFromPem(await generateDevPki({ ...window, ...ca, caCommonName: 'team-a CA' }), at);
  keyB = signerFromPem(await generateDevPki({ ...window, ...ca, caCommonName: 'team-b CA' }), at);
  // As GET /v1/keys serves it: the service CA as anchor, each customer CA as its signer's ca_pem.
  bundle = trustBundleOf({
    trust_anchors_pem: service.caCertificates.map((c) => c.toString()).join(''),
    signers: [entry(service, ''), entry(keyA, 'team-a'), entry(keyB, 'team-b')],
  });
});

describe('bundleVerifier: a customer key signs only for its own namespace', () => {
  it("refuses team-b's key signing records of team-a (UNTRUSTED_KEY naming both namespaces)", () => {
    const verify = bundleVerifier(bundle);
    const forged = runRecords(keyB, 'team-a').records;
    expect(forged.map((r) => r.kind)).toEqual(['capability', 'step', 'policy']);
    for (const r of forged) {
      const { result } = verify(apiRecord(r));
      expect(result.ok).toBe(false);
      expect(result.problems.map((p) => p.code)).toEqual(['UNTRUSTED_KEY']);
      expect(result.problems[0]?.message).toMatch(
        /namespace team-b's customer key, not one for namespace team-a$/,
      );
    }
  });

  it("accepts team-a's own key for team-a, and the service key for any namespace", () => {
    const verify = bundleVerifier(bundle);
    const records = [
      ...runRecords(keyA, 'team-a').records,
      ...runRecords(keyB, 'team-b').records,
      ...runRecords(service, 'team-a').records,
      ...runRecords(service, 'team-b').records,
    ];
    for (const r of records) expect(verify(apiRecord(r)).result).toMatchObject({ ok: true, problems: [] });
  });

  it('relabelling the unsigned namespace does not help: the signed one is judged', () => {
    const verify = bundleVerifier(bundle);
    const [capability] = runRecords(keyB, 'team-a').records;
    const { result } = verify({ ...apiRecord(capability!), namespace: 'team-b' });
    expect(result.problems.map((p) => p.code).sort()).toEqual(['LABEL_MISMATCH', 'UNTRUSTED_KEY']);
  });
});

describe('verifyBundle with the signer history: the same scope rule', () => {
  const exportOf = (signer: KeySigner, namespace: string) =>
    recordsBundle(signer, namespace, { bundleSigner: service });

  // Every CA trusted as an anchor, so that only the scope decides.
  const options = () => ({
    trustAnchors: [...service.caCertificates, ...keyA.caCertificates, ...keyB.caCertificates],
    signerHistory: bundle.signers,
  });

  it("refuses an export of team-a records signed with team-b's key", async () => {
    const result = await verifyBundle(Readable.from([await exportOf(keyB, 'team-a')]), options());
    expect(result.ok).toBe(false);
    const scope = result.problems.filter((p) => p.code === 'UNTRUSTED_KEY');
    expect(scope).toHaveLength(3);
    for (const p of scope) {
      expect(p.entry).toMatch(/^attestations\/[0-9a-f-]{36}\/envelope\.json$/);
      expect(p.message).toMatch(/namespace team-b's customer key, not one for namespace team-a$/);
    }
  });

  it("accepts team-a's own key for team-a", async () => {
    const result = await verifyBundle(Readable.from([await exportOf(keyA, 'team-a')]), options());
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
  });
});

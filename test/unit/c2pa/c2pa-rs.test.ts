/**
 * Independent validation: our manifest stores, read by c2pa-rs (the Content Authenticity
 * Initiative's reference implementation) through `@contentauth/c2pa-node`. Nothing of our own
 * code is on the validating side; trust comes only from the dev CA passed as trust anchor.
 */
import { Builder, LocalSigner, Reader } from '@contentauth/c2pa-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildManifest, verifyManifest, type BuiltManifest } from '../../../src/c2pa/index.ts';
import {
  ASSET,
  ATTESTATION_IDS,
  CLAIM_GENERATOR,
  RUN_ID,
  TITLE,
  flipByte,
  replaceOnce,
  testSigner,
  type TestSigner,
} from './fixtures.ts';

/** The parts of c2pa-rs's ManifestStore JSON these tests read. */
interface StatusEntry {
  code: string;
  url?: string;
  explanation?: string;
}
interface C2paRsManifest {
  claim_generator?: string;
  claim_version?: number;
  title?: string;
  format?: string;
  instance_id?: string;
  label?: string;
  assertions?: { label: string; data: unknown }[];
  signature_info?: { alg?: string; issuer?: string; common_name?: string };
}
interface C2paRsStore {
  active_manifest?: string;
  manifests: Record<string, C2paRsManifest>;
  validation_state?: 'Invalid' | 'Valid' | 'Trusted';
  validation_results?: {
    activeManifest?: { success: StatusEntry[]; informational: StatusEntry[]; failure: StatusEntry[] };
  };
}

async function c2paRs(store: Buffer, asset: Buffer, trustAnchorsPem: string): Promise<C2paRsStore> {
  const reader = await Reader.fromManifestDataAndAsset(
    store,
    { buffer: asset, mimeType: 'application/json' },
    { trust: { trust_anchors: trustAnchorsPem }, verify: { verify_trust: true } },
  );
  const json: unknown = reader.json();
  return json as C2paRsStore;
}

const failures = (r: C2paRsStore): string[] =>
  (r.validation_results?.activeManifest?.failure ?? []).map((f) => f.code);

let es256: TestSigner;
let es256Intermediate: TestSigner;
let ed25519: TestSigner;
let foreign: TestSigner;

beforeAll(async () => {
  [es256, es256Intermediate, ed25519, foreign] = await Promise.all([
    testSigner(),
    testSigner({ intermediate: true }),
    testSigner({ leafAlgorithm: 'ED25519', caAlgorithm: 'ED25519' }),
    testSigner({ caCommonName: 'someone else CA' }),
  ]);
});

function build(s: TestSigner): BuiltManifest {
  return buildManifest({
    asset: ASSET,
    mimeType: 'application/json',
    title: TITLE,
    signer: s.signer,
    attestationIds: ATTESTATION_IDS,
    runId: RUN_ID,
    claimGenerator: CLAIM_GENERATOR,
  });
}

describe('c2pa-rs validates our sidecar manifest store', () => {
  it.each([
    ['ES256, leaf issued by the root', () => es256, 'Es256'],
    ['ES256, leaf issued by an intermediate', () => es256Intermediate, 'Es256'],
    ['Ed25519', () => ed25519, 'Ed25519'],
  ])('%s: Trusted, claim version 1, our assertion readable', async (_name, signer, alg) => {
    const s = signer();
    const built = build(s);
    const result = await c2paRs(built.store, ASSET, s.pki['ca.crt']);
    expect(failures(result)).toEqual([]);
    expect(result.validation_state).toBe('Trusted');
    const success = (result.validation_results?.activeManifest?.success ?? []).map((e) => e.code).sort();
    expect(success).toEqual(
      [
        'signingCredential.trusted',
        'claimSignature.insideValidity',
        'claimSignature.validated',
        'assertion.hashedURI.match',
        'assertion.hashedURI.match',
        'assertion.hashedURI.match',
        'assertion.dataHash.match',
      ].sort(),
    );
    expect(result.active_manifest).toBe(built.manifestLabel);
    const manifest = result.manifests[built.manifestLabel];
    expect(manifest).toMatchObject({
      claim_version: 1,
      claim_generator: CLAIM_GENERATOR,
      title: TITLE,
      format: 'application/json',
      instance_id: built.instanceId,
      signature_info: { alg, common_name: 'aibom-vault dev signer', issuer: 'aibom-vault dev' },
    });
    expect(manifest?.assertions?.find((a) => a.label === 'dev.service.vault.attestations')?.data).toEqual({
      run_id: RUN_ID,
      attestation_ids: ATTESTATION_IDS,
    });
    expect(manifest?.assertions?.map((a) => a.label)).toContain('c2pa.actions.v2');
  });

  it('one changed asset byte: Invalid with assertion.dataHash.mismatch (ours: DATA_HASH_MISMATCH)', async () => {
    const { store } = build(es256);
    const asset = flipByte(ASSET, ASSET.length >> 1);
    const result = await c2paRs(store, asset, es256.pki['ca.crt']);
    expect(result.validation_state).toBe('Invalid');
    expect(failures(result)).toEqual(['assertion.dataHash.mismatch']);
    expect(
      verifyManifest({ store, asset, trustAnchors: es256.pki['ca.crt'] }).problems.map((p) => p.code),
    ).toEqual(['DATA_HASH_MISMATCH']);
  });

  it('changed assertion: assertion.hashedURI.mismatch (ours: ASSERTION_HASH_MISMATCH)', async () => {
    const { store } = build(es256);
    const last = ATTESTATION_IDS[2] as string;
    const tampered = replaceOnce(store, last, `${last.slice(0, -1)}9`);
    const result = await c2paRs(tampered, ASSET, es256.pki['ca.crt']);
    expect(result.validation_state).toBe('Invalid');
    expect(failures(result)).toContain('assertion.hashedURI.mismatch');
    expect(
      verifyManifest({ store: tampered, asset: ASSET, trustAnchors: es256.pki['ca.crt'] }).problems.map(
        (p) => p.code,
      ),
    ).toEqual(['ASSERTION_HASH_MISMATCH']);
  });

  it('changed claim: claimSignature.mismatch (ours: SIGNATURE_INVALID)', async () => {
    const { store } = build(es256);
    const tampered = replaceOnce(store, TITLE, TITLE.replace('aibom-', 'aibox-'));
    const result = await c2paRs(tampered, ASSET, es256.pki['ca.crt']);
    expect(result.validation_state).toBe('Invalid');
    expect(failures(result)).toContain('claimSignature.mismatch');
    expect(
      verifyManifest({ store: tampered, asset: ASSET, trustAnchors: es256.pki['ca.crt'] }).problems.map(
        (p) => p.code,
      ),
    ).toEqual(['SIGNATURE_INVALID']);
  });

  it('chain from a different CA: not Trusted, signingCredential.untrusted (ours: UNTRUSTED_SIGNER)', async () => {
    const { store } = build(es256);
    const result = await c2paRs(store, ASSET, foreign.pki['ca.crt']);
    // c2pa-rs calls an intact manifest by an unknown signer "Valid": only "Trusted" is good enough.
    expect(result.validation_state).toBe('Valid');
    expect(failures(result)).toEqual(['signingCredential.untrusted']);
    expect(
      verifyManifest({ store, asset: ASSET, trustAnchors: foreign.pki['ca.crt'] }).problems.map(
        (p) => p.code,
      ),
    ).toEqual(['UNTRUSTED_SIGNER']);
  });

  it('expired leaf and no timestamp: signingCredential.expired (ours: CERTIFICATE_EXPIRED)', async () => {
    const now = Date.now();
    const old = await testSigner({
      caNotBefore: new Date(now - 4 * 86_400_000),
      notBefore: new Date(now - 3 * 86_400_000),
      notAfter: new Date(now - 86_400_000),
    });
    const { store } = build(old);
    const result = await c2paRs(store, ASSET, old.pki['ca.crt']);
    expect(result.validation_state).toBe('Invalid');
    expect(failures(result)).toEqual(['signingCredential.expired']);
    expect(
      verifyManifest({ store, asset: ASSET, trustAnchors: old.pki['ca.crt'] }).problems.map((p) => p.code),
    ).toEqual(['CERTIFICATE_EXPIRED']);
  });
});

describe('our verifier reads what c2pa-rs writes', () => {
  it('accepts a c2pa-rs sidecar (claim v1) except for the missing vault assertion', () => {
    const signer = LocalSigner.newSigner(
      Buffer.from(es256Intermediate.pki['tls.crt']),
      Buffer.from(es256Intermediate.pki['tls.key']),
      'es256',
    );
    const builder = Builder.withJson({
      claim_generator_info: [{ name: 'c2pa-rs-reference', version: '1.0.0' }],
      title: TITLE,
      format: 'application/json',
      claim_version: 1,
      assertions: [
        {
          label: 'c2pa.actions',
          data: {
            actions: [
              {
                action: 'c2pa.created',
                digitalSourceType: 'http://cv.iptc.org/newscodes/digitalsourcetype/algorithmicMedia',
              },
            ],
          },
        },
      ],
    });
    builder.setNoEmbed(true);
    const store = builder.sign(signer, { buffer: ASSET, mimeType: 'application/json' }, { buffer: null });
    const result = verifyManifest({ store, asset: ASSET, trustAnchors: es256Intermediate.pki['ca.crt'] });
    expect(result.problems).toEqual([
      { code: 'UNSUPPORTED_MANIFEST', message: 'manifest has no dev.service.vault.attestations assertion' },
    ]);
    expect(result.signerKeyId).toBe(es256Intermediate.signer.keyId);
    expect(result.title).toBe(TITLE);
    const tampered = verifyManifest({
      store,
      asset: flipByte(ASSET, 0),
      trustAnchors: es256Intermediate.pki['ca.crt'],
    });
    expect(tampered.problems.map((p) => p.code)).toEqual(['DATA_HASH_MISMATCH', 'UNSUPPORTED_MANIFEST']);
  });
});

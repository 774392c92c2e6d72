import { hash, verify, type X509Certificate } from 'node:crypto';
import { Decoder, Tag } from 'cbor-x';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildManifest, C2paError, verifyManifest, type BuiltManifest } from '../../../src/c2pa/index.ts';
import {
  childSuperBoxes,
  contentBoxes,
  parseJumbf,
  payloadOf,
  Uuids,
  type SuperBox,
} from '../../../src/c2pa/jumbf.ts';
import { parseCertificates, signerFromPem } from '../../../src/signing/index.ts';
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

/** A plain decoder, independent of the module's own configuration. */
const objects = new Decoder({ useRecords: false, mapsAsObjects: true });
const maps = new Decoder({ useRecords: false, mapsAsObjects: false });

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

function build(s: TestSigner, extra: Partial<Parameters<typeof buildManifest>[0]> = {}): BuiltManifest {
  return buildManifest({
    asset: ASSET,
    mimeType: 'application/json',
    title: TITLE,
    signer: s.signer,
    attestationIds: ATTESTATION_IDS,
    runId: RUN_ID,
    claimGenerator: CLAIM_GENERATOR,
    ...extra,
  });
}

function manifestParts(store: Buffer): {
  manifest: SuperBox;
  assertions: SuperBox[];
  claim: Buffer;
  cose: Buffer;
} {
  const top = parseJumbf(store);
  const [manifest] = childSuperBoxes(top) as [SuperBox];
  const [assertionStore, claimBox, signatureBox] = childSuperBoxes(manifest) as [
    SuperBox,
    SuperBox,
    SuperBox,
  ];
  return {
    manifest,
    assertions: childSuperBoxes(assertionStore),
    claim: (contentBoxes(claimBox)[0] as { payload: Buffer }).payload,
    cose: (contentBoxes(signatureBox)[0] as { payload: Buffer }).payload,
  };
}

const codes = (r: { problems: { code: string }[] }): string[] => r.problems.map((p) => p.code);

describe('buildManifest: layout', () => {
  it('writes one manifest with assertion store, claim and signature, labelled as C2PA 1.4 expects', () => {
    const built = build(es256);
    expect(built.manifestLabel).toMatch(
      /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(built.digest).toBe(`sha256:${hash('sha256', built.store)}`);
    const top = parseJumbf(built.store);
    expect(top.label).toBe('c2pa');
    expect(top.uuid.toString('hex')).toBe('6332706100110010800000aa00389b71');
    const [manifest] = childSuperBoxes(top) as [SuperBox];
    expect(childSuperBoxes(top)).toHaveLength(1);
    expect(manifest.label).toBe(built.manifestLabel);
    expect(manifest.uuid.equals(Uuids.manifest)).toBe(true);
    expect(childSuperBoxes(manifest).map((b) => [b.uuid.subarray(0, 4).toString('latin1'), b.label])).toEqual(
      [
        ['c2as', 'c2pa.assertions'],
        ['c2cl', 'c2pa.claim'],
        ['c2cs', 'c2pa.signature'],
      ],
    );
    const { assertions } = manifestParts(built.store);
    expect(assertions.map((a) => [a.uuid.subarray(0, 4).toString('latin1'), a.label])).toEqual([
      ['cbor', 'c2pa.hash.data'],
      ['cbor', 'c2pa.actions.v2'],
      ['cbor', 'dev.service.vault.attestations'],
    ]);
  });

  it('writes a version 1 claim whose hashed URIs cover each assertion box without its header', () => {
    const built = build(es256, { instanceId: 'xmp:iid:fixed', time: new Date('2025-01-02T03:04:05Z') });
    const { assertions, claim } = manifestParts(built.store);
    const decoded = objects.decode(claim) as Record<string, unknown>;
    expect(Object.keys(decoded)).toEqual([
      'claim_generator',
      'claim_generator_info',
      'signature',
      'assertions',
      'dc:format',
      'instanceID',
      'dc:title',
      'alg',
    ]);
    expect(decoded).toMatchObject({
      claim_generator: 'aibom-vault/0.1.0',
      claim_generator_info: [{ name: 'aibom-vault', version: '0.1.0' }],
      signature: 'self#jumbf=c2pa.signature',
      'dc:format': 'application/json',
      instanceID: 'xmp:iid:fixed',
      'dc:title': TITLE,
      alg: 'sha256',
    });
    expect(decoded.assertions).toEqual(
      assertions.map((a) => ({
        url: `self#jumbf=c2pa.assertions/${a.label}`,
        alg: 'sha256',
        hash: hash('sha256', payloadOf(a), 'buffer'),
      })),
    );
    const bodies = assertions.map(
      (a) => objects.decode((contentBoxes(a)[0] as { payload: Buffer }).payload) as unknown,
    );
    expect(bodies).toEqual([
      { name: 'jumbf manifest', alg: 'sha256', hash: hash('sha256', ASSET, 'buffer'), pad: Buffer.alloc(0) },
      {
        actions: [
          {
            action: 'c2pa.created',
            when: '2025-01-02T03:04:05.000Z',
            softwareAgent: { name: 'aibom-vault', version: '0.1.0' },
            digitalSourceType: 'http://cv.iptc.org/newscodes/digitalsourcetype/algorithmicMedia',
          },
        ],
      },
      { run_id: RUN_ID, attestation_ids: ATTESTATION_IDS },
    ]);
  });

  it('signs the claim as detached COSE_Sign1 with alg and x5chain (leaf, intermediates, no root) protected', () => {
    for (const [s, alg] of [
      [es256, -7],
      [es256Intermediate, -7],
      [ed25519, -8],
    ] as const) {
      const { claim, cose } = manifestParts(build(s).store);
      const tagged = maps.decode(cose) as Tag;
      expect(tagged).toBeInstanceOf(Tag);
      expect(tagged.tag).toBe(18);
      const [protectedBytes, unprotected, payload, signature] = tagged.value as [
        Buffer,
        Map<unknown, unknown>,
        null,
        Buffer,
      ];
      // A plain two-entry map: no tag 259 (cbor-x Map marker) nor tag 64 (typed array) anywhere.
      expect(protectedBytes[0]).toBe(0xa2);
      const header = maps.decode(protectedBytes) as Map<number, unknown>;
      expect([...header.keys()]).toEqual([1, 33]);
      expect(header.get(1)).toBe(alg);
      const chain = s.signer.certificateChain ?? [];
      const x5chain = header.get(33);
      if (chain.length === 1) expect(x5chain).toEqual((chain[0] as X509Certificate).raw);
      else expect(x5chain).toEqual(chain.map((c) => c.raw));
      const root = parseCertificates(s.pki['ca.crt'], 'ca')[0] as X509Certificate;
      expect(cose.includes(root.raw)).toBe(false);
      expect(unprotected.size).toBe(0);
      expect(payload).toBeNull();
      expect(signature).toHaveLength(64);
      // Sig_structure ["Signature1", protected, h'', claim], rebuilt by hand.
      expect(
        verify(
          alg === -7 ? 'sha256' : null,
          sigStructureOf(protectedBytes, claim),
          { key: s.signer.publicKey, dsaEncoding: 'ieee-p1363' },
          signature,
        ),
      ).toBe(true);
    }
  });

  it('leaves a root that tls.crt carries out of x5chain', () => {
    const withRoot = signerFromPem({
      'tls.crt': `${es256Intermediate.pki['tls.crt']}${es256Intermediate.pki['ca.crt']}`,
      'tls.key': es256Intermediate.pki['tls.key'],
    });
    expect(withRoot.certificateChain).toHaveLength(3);
    const { cose } = manifestParts(build(es256Intermediate, { signer: withRoot }).store);
    const [protectedBytes] = (maps.decode(cose) as Tag).value as [Buffer];
    const header = maps.decode(protectedBytes) as Map<number, unknown>;
    expect(header.get(33)).toEqual(withRoot.certificateChain?.slice(0, 2).map((c) => c.raw));
  });

  it('rejects unusable input', () => {
    const noChain = { ...es256.signer, certificateChain: undefined } as unknown as typeof es256.signer;
    const cases: [Partial<Parameters<typeof buildManifest>[0]>, RegExp][] = [
      [{ signer: noChain }, /X\.509 certificate chain/],
      [{ claimGenerator: 'aibom-vault' }, /name\/version/],
      [{ mimeType: 'json' }, /media type/],
      [{ title: '' }, /title/],
      [{ attestationIds: [''] }, /attestationIds/],
      [{ time: new Date(Number.NaN) }, /time/],
    ];
    for (const [extra, message] of cases) {
      expect(() => build(es256, extra)).toThrow(message);
      try {
        build(es256, extra);
      } catch (error) {
        expect(error).toBeInstanceOf(C2paError);
        expect((error as C2paError).code).toBe('INVALID_INPUT');
      }
    }
  });
});

/** Sig_structure by hand, with a CBOR encoder independent of the module's. */
function sigStructureOf(protectedBytes: Buffer, payload: Buffer): Buffer {
  const bstr = (b: Buffer): Buffer =>
    Buffer.concat([
      b.length < 24
        ? Buffer.from([0x40 + b.length])
        : b.length < 256
          ? Buffer.from([0x58, b.length])
          : Buffer.from([0x59, b.length >> 8, b.length & 0xff]),
      b,
    ]);
  return Buffer.concat([
    Buffer.from([0x84, 0x6a]),
    Buffer.from('Signature1'),
    bstr(protectedBytes),
    bstr(Buffer.alloc(0)),
    bstr(payload),
  ]);
}

describe('verifyManifest', () => {
  it('accepts ES256, ES256 via an intermediate and Ed25519, and returns what the manifest links', () => {
    for (const s of [es256, es256Intermediate, ed25519]) {
      const built = build(s);
      const result = verifyManifest({ store: built.store, asset: ASSET, trustAnchors: s.pki['ca.crt'] });
      expect(result.problems).toEqual([]);
      expect(result).toMatchObject({
        ok: true,
        manifestLabel: built.manifestLabel,
        signerKeyId: s.signer.keyId,
        signer: 'CN=aibom-vault dev signer, O=aibom-vault dev',
        claimGenerator: CLAIM_GENERATOR,
        title: TITLE,
        format: 'application/json',
        instanceId: built.instanceId,
        runId: RUN_ID,
        attestationIds: ATTESTATION_IDS,
      });
    }
  });

  it('reports DATA_HASH_MISMATCH when one asset byte changes, and only that', () => {
    const { store } = build(es256);
    for (const index of [0, ASSET.length >> 1, ASSET.length - 1]) {
      const result = verifyManifest({
        store,
        asset: flipByte(ASSET, index),
        trustAnchors: es256.pki['ca.crt'],
      });
      expect(result.ok).toBe(false);
      expect(codes(result)).toEqual(['DATA_HASH_MISMATCH']);
    }
    expect(
      codes(
        verifyManifest({
          store,
          asset: Buffer.concat([ASSET, Buffer.from('\n')]),
          trustAnchors: es256.pki['ca.crt'],
        }),
      ),
    ).toEqual(['DATA_HASH_MISMATCH']);
  });

  it('reports ASSERTION_HASH_MISMATCH when an assertion changes, and does not return its content', () => {
    const { store } = build(es256);
    const last = ATTESTATION_IDS[2] as string;
    const tampered = replaceOnce(store, last, `${last.slice(0, -1)}9`);
    const result = verifyManifest({ store: tampered, asset: ASSET, trustAnchors: es256.pki['ca.crt'] });
    expect(codes(result)).toEqual(['ASSERTION_HASH_MISMATCH']);
    expect(result.attestationIds).toBeUndefined();
  });

  it('reports SIGNATURE_INVALID when the claim or the signature changes', () => {
    const { store } = build(es256);
    const claimTampered = replaceOnce(store, TITLE, TITLE.replace('aibom-', 'aibox-'));
    const result = verifyManifest({ store: claimTampered, asset: ASSET, trustAnchors: es256.pki['ca.crt'] });
    expect(codes(result)).toEqual(['SIGNATURE_INVALID']);
    // An unsigned claim vouches for nothing: its linked attestations are not reported.
    expect(result.attestationIds).toBeUndefined();
    expect(result.runId).toBeUndefined();
    // The COSE signature is the last item of the store.
    const sigTampered = flipByte(store, store.length - 1);
    expect(
      codes(verifyManifest({ store: sigTampered, asset: ASSET, trustAnchors: es256.pki['ca.crt'] })),
    ).toEqual(['SIGNATURE_INVALID']);
  });

  it('reports UNTRUSTED_SIGNER for a chain from another CA and CERTIFICATE_EXPIRED outside the validity', async () => {
    const { store } = build(es256);
    const untrusted = verifyManifest({ store, asset: ASSET, trustAnchors: foreign.pki['ca.crt'] });
    expect(codes(untrusted)).toEqual(['UNTRUSTED_SIGNER']);
    // Intact but by an unknown signer: content is reported, `ok` says not to rely on it.
    expect(untrusted).toMatchObject({ ok: false, attestationIds: ATTESTATION_IDS, runId: RUN_ID });
    const anchors = parseCertificates(`${foreign.pki['ca.crt']}${es256.pki['ca.crt']}`, 'anchors');
    expect(verifyManifest({ store, asset: ASSET, trustAnchors: anchors }).ok).toBe(true);

    const now = Date.now();
    const old = await testSigner({
      caNotBefore: new Date(now - 4 * 86_400_000),
      notBefore: new Date(now - 3 * 86_400_000),
      notAfter: new Date(now - 86_400_000),
    });
    const stale = build(old).store;
    expect(codes(verifyManifest({ store: stale, asset: ASSET, trustAnchors: old.pki['ca.crt'] }))).toEqual([
      'CERTIFICATE_EXPIRED',
    ]);
    // Verification at a time inside the validity (what a trusted timestamp would give) passes.
    const at = new Date(now - 2 * 86_400_000);
    expect(verifyManifest({ store: stale, asset: ASSET, trustAnchors: old.pki['ca.crt'], at }).ok).toBe(true);
  });

  it('reports MALFORMED_MANIFEST for bytes that are not a manifest store, without throwing', () => {
    const { store } = build(es256);
    for (const bad of [
      Buffer.alloc(0),
      Buffer.from('not jumbf at all'),
      store.subarray(0, store.length - 1),
      ASSET,
    ]) {
      const result = verifyManifest({ store: bad, asset: ASSET, trustAnchors: es256.pki['ca.crt'] });
      expect(codes(result)).toEqual(['MALFORMED_MANIFEST']);
    }
  });

  it('never throws on damaged stores, and rejects every change inside the claim, assertions or signature', () => {
    const { store } = build(es256);
    const { assertions, claim, cose } = manifestParts(store);
    // Signed or hashed regions; jumd toggles and the manifest label are covered by neither (as in c2pa-rs).
    const first = store.indexOf(payloadOf(assertions[0] as SuperBox));
    const covered = [
      [first, store.indexOf(claim) + claim.length],
      [store.indexOf(cose), store.length],
    ] as const;
    fc.assert(
      fc.property(fc.nat({ max: store.length - 1 }), fc.integer({ min: 1, max: 255 }), (index, mask) => {
        const damaged = Buffer.from(store);
        damaged[index] = (damaged[index] as number) ^ mask;
        const result = verifyManifest({ store: damaged, asset: ASSET, trustAnchors: es256.pki['ca.crt'] });
        if (covered.some(([from, to]) => index >= from && index < to)) {
          // Bytes between assertion boxes are box headers: still a change to the store's content.
          expect(result.ok).toBe(false);
        }
        expect(Array.isArray(result.problems)).toBe(true);
      }),
      { numRuns: 400 },
    );
    fc.assert(
      fc.property(fc.nat({ max: store.length - 1 }), (length) => {
        expect(
          verifyManifest({
            store: store.subarray(0, length),
            asset: ASSET,
            trustAnchors: es256.pki['ca.crt'],
          }).ok,
        ).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it('throws for unusable trust anchors (a caller bug, not a manifest problem)', () => {
    const { store } = build(es256);
    expect(() => verifyManifest({ store, asset: ASSET, trustAnchors: 'no pem here' })).toThrow(
      /no PEM certificate/,
    );
  });
});

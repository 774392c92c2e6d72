import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Reader } from '@contentauth/c2pa-node';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  buildManifest,
  buildTimestampedManifest,
  verifyManifest,
  type BuiltManifest,
} from '../../../src/c2pa/index.ts';
import { createTsaClient, type Timestamper, type VerifiedTimestamp } from '../../../src/timestamp/index.ts';
import {
  ASSET,
  ATTESTATION_IDS,
  CLAIM_GENERATOR,
  RUN_ID,
  TITLE,
  testSigner,
} from '../../unit/c2pa/fixtures.ts';
import type { TestSigner } from '../../unit/c2pa/fixtures.ts';
import { stack } from '../../helpers/stack.ts';

/**
 * C2PA 1.4 time-stamps (`sigTst`) from the stack's real TSA, judged by c2pa-rs (through
 * `@contentauth/c2pa-node`) and by our verifier, after the signer's leaf has expired: the
 * manifest stays valid because its certificates are judged at the time-stamp's time.
 */
interface StatusEntry {
  code: string;
}
interface C2paRsStore {
  validation_state?: 'Invalid' | 'Valid' | 'Trusted';
  validation_results?: {
    activeManifest?: { success: StatusEntry[]; informational: StatusEntry[]; failure: StatusEntry[] };
  };
}

async function c2paRs(store: Buffer, trustAnchorsPem: string): Promise<C2paRsStore> {
  const reader = await Reader.fromManifestDataAndAsset(
    store,
    { buffer: ASSET, mimeType: 'application/json' },
    // The TSA's CA is passed with the signer's. (c2pa-rs 0.90.1 in c2pa-node 0.8.0 was seen to
    // accept a time-stamp from a TSA outside trust_anchors even with verify_timestamp_trust; our
    // verifier does not: see 'ours: ...' below.)
    {
      trust: { trust_anchors: trustAnchorsPem },
      verify: { verify_trust: true, verify_timestamp_trust: true },
    },
  );
  return reader.json() as C2paRsStore;
}

const codes = (r: C2paRsStore, kind: 'success' | 'informational' | 'failure'): string[] =>
  (r.validation_results?.activeManifest?.[kind] ?? []).map((e) => e.code);

let tsa: Timestamper;
let tsaCaPem: string;
let tsaAnchors: X509Certificate[];

beforeAll(async () => {
  tsaCaPem = await readFile(stack().env.TSA_TRUST_ANCHORS!, 'utf8');
  tsaAnchors = [new X509Certificate(tsaCaPem)];
  tsa = createTsaClient({ url: stack().env.TSA_URL!, trustAnchors: tsaAnchors, deadlineMs: 20_000 });
});

const input = (s: TestSigner) => ({
  asset: ASSET,
  mimeType: 'application/json',
  title: TITLE,
  signer: s.signer,
  attestationIds: ATTESTATION_IDS,
  runId: RUN_ID,
  claimGenerator: CLAIM_GENERATOR,
});

/** Waits (briefly: the leaf lives seconds) until `s`'s leaf has expired. */
async function untilExpired(s: TestSigner): Promise<void> {
  const end = s.signer.certificateChain![0]!.validToDate.getTime();
  while (Date.now() <= end + 1_000) await new Promise((r) => setTimeout(r, 200));
}

describe('a time-stamped manifest after its signer expired', () => {
  let signer: TestSigner;
  let stamped: BuiltManifest & { timestamp: VerifiedTimestamp };
  let plain: BuiltManifest;

  beforeAll(async () => {
    // A leaf valid for a few seconds, made in the test: expiry without waiting for a real one.
    signer = await testSigner({
      notBefore: new Date(Date.now() - 60_000),
      notAfter: new Date(Date.now() + 3_000),
    });
    stamped = await buildTimestampedManifest(input(signer), (data) => tsa.timestamp(data));
    plain = buildManifest(input(signer));
    await untilExpired(signer);
  });

  it('c2pa-rs: Trusted, the time-stamp validated and trusted; the same manifest without it: expired', async () => {
    const result = await c2paRs(stamped.store, signer.pki['ca.crt'] + tsaCaPem);
    expect(codes(result, 'failure')).toEqual([]);
    expect(result.validation_state).toBe('Trusted');
    expect(codes(result, 'success')).toEqual(
      expect.arrayContaining(['timeStamp.validated', 'timeStamp.trusted', 'signingCredential.trusted']),
    );
    const unstamped = await c2paRs(plain.store, signer.pki['ca.crt'] + tsaCaPem);
    expect(unstamped.validation_state).not.toBe('Trusted');
    expect(codes(unstamped, 'failure')).toContain('signingCredential.expired');
  });

  it('ours: ok, certificates judged at the time-stamp; without the TSA anchor: CERTIFICATE_EXPIRED', () => {
    const ok = verifyManifest({
      store: stamped.store,
      asset: ASSET,
      trustAnchors: signer.pki['ca.crt'],
      tsaTrustAnchors: tsaAnchors,
    });
    expect(ok.problems).toEqual([]);
    expect(ok.ok).toBe(true);
    expect(ok.timestamp).toMatchObject({ trusted: true, time: stamped.timestamp.genTime });
    expect(ok.checkedAt).toEqual(stamped.timestamp.genTime);
    const untrusted = verifyManifest({
      store: stamped.store,
      asset: ASSET,
      trustAnchors: signer.pki['ca.crt'],
    });
    expect(untrusted.problems.map((p) => p.code)).toEqual(['CERTIFICATE_EXPIRED']);
    expect(untrusted.timestamp?.trusted).toBe(false);
    expect(untrusted.timestamp?.reason).toMatch(/^UNTRUSTED_TSA/);
    expect(
      verifyManifest({
        store: plain.store,
        asset: ASSET,
        trustAnchors: signer.pki['ca.crt'],
        tsaTrustAnchors: tsaAnchors,
      }).problems.map((p) => p.code),
    ).toEqual(['CERTIFICATE_EXPIRED']);
  });
});

describe('time-stamps that must not save a manifest', () => {
  it('a token for other data in sigTst: ours TIMESTAMP_INVALID, c2pa-rs timeStamp.mismatch', async () => {
    const s = await testSigner();
    const forged = await buildTimestampedManifest(input(s), () =>
      tsa.timestamp(Buffer.from('some other claim')),
    );
    const ours = verifyManifest({
      store: forged.store,
      asset: ASSET,
      trustAnchors: s.pki['ca.crt'],
      tsaTrustAnchors: tsaAnchors,
    });
    expect(ours.problems.map((p) => p.code)).toEqual(['TIMESTAMP_INVALID']);
    const theirs = await c2paRs(forged.store, s.pki['ca.crt'] + tsaCaPem);
    expect([...codes(theirs, 'informational'), ...codes(theirs, 'failure')]).toContain('timeStamp.mismatch');
    expect(codes(theirs, 'success')).not.toContain('timeStamp.validated');
  });

  it('a trusted time-stamp before the leaf was valid: TIMESTAMP_OUTSIDE_VALIDITY (c2pa-rs: not trusted)', async () => {
    const s = await testSigner({
      notBefore: new Date(Date.now() + 3_600_000),
      notAfter: new Date(Date.now() + 7_200_000),
    });
    const early = await buildTimestampedManifest(input(s), (data) => tsa.timestamp(data));
    const ours = verifyManifest({
      store: early.store,
      asset: ASSET,
      trustAnchors: s.pki['ca.crt'],
      tsaTrustAnchors: tsaAnchors,
    });
    expect(ours.problems.map((p) => p.code)).toEqual(['TIMESTAMP_OUTSIDE_VALIDITY']);
    const theirs = await c2paRs(early.store, s.pki['ca.crt'] + tsaCaPem);
    expect(theirs.validation_state).not.toBe('Trusted');
    expect(codes(theirs, 'failure').length).toBeGreaterThan(0);
  });
});

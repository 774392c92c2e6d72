import { createPublicKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { canonicalJson, envelopeDigest, verifyRecord, type DsseEnvelope } from '../../../src/attest/index.ts';

/** The worked example of docs/digest.md; this test keeps the document true. */
describe('docs/digest.md worked example', () => {
  it('recomputes the documented digest and verifies with the documented public key', async () => {
    const url = new URL('../../fixtures/golden/digest-example.record.json', import.meta.url);
    const record = JSON.parse(await readFile(url, 'utf8')) as {
      envelope: DsseEnvelope;
      digest: string;
      public_key_pem: string;
    };
    expect(record.digest).toBe('sha256:7dee066046a26d4ea341a90daf6c149948afb4872525eedf99abeaffb6533033');
    expect(envelopeDigest(record.envelope)).toBe(record.digest);
    expect(canonicalJson(record.envelope).startsWith('{"payload":"eyJfdHlwZSI6')).toBe(true);
    const result = verifyRecord(record, { publicKeys: [createPublicKey(record.public_key_pem)] });
    expect(result.problems).toEqual([]);
    expect(result.keyId).toBe('sha256:ca4909db56df1101a71ab7f4dc46cef675d08db570fa75af1f5c557ba87fb636');
    expect(result.predicateType).toBe('https://vault.service.dev/attestations/policy/v1');
  });
});

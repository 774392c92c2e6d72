/**
 * SigV4 (src/blob/sigv4.ts) against AWS's published example ("Example: GET Object" of the S3 API
 * reference, Authenticating Requests: Using the Authorization Header), and the encoding rules it
 * depends on. Two independent servers check real signatures in the integration tests (MinIO and
 * SeaweedFS: test/integration/blob/s3-compat.test.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  amzDate,
  EMPTY_SHA256,
  encodeKey,
  encodeSegment,
  sha256Hex,
  signRequest,
} from '../../../src/blob/sigv4.ts';

const creds = {
  accessKey: 'AKIAIOSFODNN7EXAMPLE',
  secretKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  region: 'us-east-1',
};

describe('SigV4', () => {
  it("reproduces AWS's GET Object example signature", () => {
    const headers = signRequest(
      {
        method: 'GET',
        host: 'examplebucket.s3.amazonaws.com',
        path: '/test.txt',
        headers: { Range: 'bytes=0-9' },
        payloadSha256: EMPTY_SHA256,
      },
      creds,
      new Date('2013-05-24T00:00:00Z'),
    );
    expect(headers.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,' +
        'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,' +
        'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    );
    expect(headers['x-amz-date']).toBe('20130524T000000Z');
  });

  it('any change of what is signed changes the signature', () => {
    const base: {
      method: string;
      host: string;
      path: string;
      headers: Record<string, string>;
      payloadSha256: string;
    } = {
      method: 'PUT',
      host: '127.0.0.1:9000',
      path: '/bucket/runs/a/aibom.json',
      headers: { 'content-type': 'application/json' },
      payloadSha256: sha256Hex('{"a":1}'),
    };
    const at = new Date('2026-01-01T00:00:00Z');
    const sig = (r: typeof base) => signRequest(r, creds, at).authorization;
    const reference = sig(base);
    expect(sig({ ...base, payloadSha256: sha256Hex('{"a":2}') })).not.toBe(reference);
    expect(sig({ ...base, path: '/bucket/runs/b/aibom.json' })).not.toBe(reference);
    expect(sig({ ...base, host: '127.0.0.1:9001' })).not.toBe(reference);
    expect(sig({ ...base, headers: { 'content-type': 'text/plain' } })).not.toBe(reference);
    expect(signRequest(base, { ...creds, secretKey: 'other' }, at).authorization).not.toBe(reference);
    // Header names are case-insensitive and values trimmed, as the servers canonicalise them.
    expect(sig({ ...base, headers: { 'Content-Type': '  application/json ' } })).toBe(reference);
  });

  it('encodes keys as S3 canonicalises them: unreserved kept, everything else %XX, slashes kept', () => {
    expect(encodeSegment("a b+c!'()*~._-")).toBe('a%20b%2Bc%21%27%28%29%2A~._-');
    expect(encodeSegment('é')).toBe('%C3%A9');
    expect(encodeKey('runs/ns/a b/aibom.json')).toBe('runs/ns/a%20b/aibom.json');
    expect(amzDate(new Date('2026-11-26T14:05:09.123Z'))).toBe('20261126T140509Z');
  });
});

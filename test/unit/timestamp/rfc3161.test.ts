import { hash } from 'node:crypto';
import * as pkijs from 'pkijs';
import { describe, expect, it } from 'vitest';
import {
  randomNonce,
  readTimestamp,
  TimestampError,
  timestampRequest,
  verifyTimestamp,
} from '../../../src/timestamp/index.ts';
import { dsseSignatureBytes } from '../../../src/timestamp/sigstore.ts';

/**
 * The pure parts of the RFC 3161 client: what a request says, and that garbage is refused with a
 * code. Answers of a real TSA are tested in test/integration/timestamp (OpenSSL cross-checks the
 * request there too).
 */
describe('timestampRequest', () => {
  it('asks for SHA-256 of the data, with the nonce and certReq', () => {
    const data = Buffer.from('signature bytes');
    for (const nonce of [1n, 0x7fn, 0x80n, 0x8000_0000_0000_0001n, randomNonce()]) {
      const req = timestampRequest(data, nonce);
      const parsed = pkijs.TimeStampReq.fromBER(req.der);
      expect(parsed.version).toBe(1);
      expect(parsed.certReq).toBe(true);
      expect(parsed.messageImprint.hashAlgorithm.algorithmId).toBe('2.16.840.1.101.3.4.2.1');
      expect(Buffer.from(parsed.messageImprint.hashedMessage.valueBlock.valueHexView)).toEqual(
        hash('sha256', data, 'buffer'),
      );
      // A positive INTEGER (a leading zero octet when the top bit is set) with the nonce's value.
      const bytes = Buffer.from(parsed.nonce!.valueBlock.valueHexView);
      expect(bytes[0]! & 0x80).toBe(0);
      expect(BigInt(`0x${bytes.toString('hex')}`)).toBe(nonce);
      expect(req.nonce).toBe(nonce);
    }
  });

  it('random nonces are positive and differ', () => {
    const nonces = new Set(Array.from({ length: 64 }, () => randomNonce()));
    expect(nonces.size).toBe(64);
    for (const n of nonces) expect(n > 0n && n < 1n << 63n).toBe(true);
  });
});

describe('garbage is refused with a code', () => {
  it.each([
    ['empty', Buffer.alloc(0)],
    ['not DER', Buffer.from('hello')],
    ['a TimeStampReq instead of an answer', timestampRequest(Buffer.from('x')).der],
  ])('%s: MALFORMED_TIMESTAMP', (_name, bytes) => {
    for (const f of [
      () => readTimestamp(bytes),
      () => verifyTimestamp(bytes, { data: Buffer.alloc(0), trustAnchors: [] }),
    ]) {
      let err: unknown;
      try {
        f();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TimestampError);
      expect((err as TimestampError).code).toBe('MALFORMED_TIMESTAMP');
    }
  });

  it('a refusal (PKIStatus rejection) is TSA_REJECTED with the TSA text', () => {
    const resp = new pkijs.TimeStampResp({
      status: new pkijs.PKIStatusInfo({ status: pkijs.PKIStatus.rejection }),
    });
    const der = Buffer.from(resp.toSchema().toBER(false));
    expect(() => readTimestamp(der)).toThrow(TimestampError);
    try {
      readTimestamp(der);
    } catch (e) {
      expect((e as TimestampError).code).toBe('TSA_REJECTED');
      expect((e as Error).message).toContain('rejection');
    }
  });

  it('a DSSE envelope without a signature has nothing to time-stamp', () => {
    expect(() => dsseSignatureBytes({ signatures: [] })).toThrow(TimestampError);
    expect(dsseSignatureBytes({ signatures: [{ sig: Buffer.from([1, 2, 3]).toString('base64') }] })).toEqual(
      Buffer.from([1, 2, 3]),
    );
  });
});

import { dsse as sigstoreDsse } from '@sigstore/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { preAuthEncoding } from '../../../src/attest/pae.ts';

describe('DSSE pre-authentication encoding', () => {
  it('matches the DSSE protocol example byte for byte', () => {
    // protocol.md: PAE("http://example.com/HelloWorld", "hello world")
    const pae = preAuthEncoding('http://example.com/HelloWorld', Buffer.from('hello world'));
    expect(pae.toString('latin1')).toBe('DSSEv1 29 http://example.com/HelloWorld 11 hello world');
    // Same thing spelled out as bytes: "DSSEv1" SP "29" SP type SP "11" SP body.
    expect(pae).toEqual(
      Buffer.concat([
        Buffer.from([0x44, 0x53, 0x53, 0x45, 0x76, 0x31, 0x20, 0x32, 0x39, 0x20]),
        Buffer.from('http://example.com/HelloWorld', 'ascii'),
        Buffer.from([0x20, 0x31, 0x31, 0x20]),
        Buffer.from('hello world', 'ascii'),
      ]),
    );
  });

  it('uses the in-toto prefix for the in-toto payload type, also for an empty body', () => {
    expect(preAuthEncoding('application/vnd.in-toto+json', Buffer.alloc(0)).toString()).toBe(
      'DSSEv1 28 application/vnd.in-toto+json 0 ',
    );
  });

  it('counts bytes, not characters, and keeps the body binary-exact', () => {
    const body = Buffer.from([0x00, 0xff, 0x20, 0x0a]);
    const pae = preAuthEncoding('tÿpe/ü', body);
    expect(pae.subarray(0, 20).toString('utf8')).toBe('DSSEv1 8 tÿpe/ü 4 ');
    expect(pae.subarray(pae.length - 4)).toEqual(body);
  });

  it('agrees with @sigstore/core on arbitrary types and payloads (independent implementation)', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.constant('application/vnd.in-toto+json'), fc.string({ unit: 'grapheme' })),
        fc.uint8Array({ maxLength: 2048 }),
        (type, bytes) => {
          const payload = Buffer.from(bytes);
          expect(preAuthEncoding(type, payload)).toEqual(sigstoreDsse.preAuthEncoding(type, payload));
        },
      ),
      { numRuns: 500 },
    );
  });
});

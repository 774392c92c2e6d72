import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cborHead, cborHeadLength, CborMajor, writeCborHead } from '../../../src/cose/cbor-assembly.ts';
import { cborUint, encodeCbor, Tag } from '../../../src/cose/cbor.ts';
import { encodeSign1, Header } from '../../../src/cose/sign1.ts';
import {
  issueReceipt,
  receiptsUnder,
  sign1Entry,
  signTreeHead,
  VDP_INCLUSION,
  type InclusionProof,
} from '../../../src/transparency/receipt.ts';
import { decodeSign1 } from '../../../src/transparency/statement.ts';
import { logSigner } from './fixtures.ts';

/**
 * The log assembles entries, inclusion proofs and receipts by hand (no generic encoder pass). The
 * bytes must be exactly what the generic CBOR encoder writes for the same structure, or leaf hashes
 * and receipts would differ from what a verifier re-encodes.
 */

const hash32 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((a) => Buffer.from(a));
const proofArb: fc.Arbitrary<InclusionProof> = fc
  .record({
    treeSize: fc.oneof(
      fc.integer({ min: 1, max: 300 }),
      fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    ),
    path: fc.array(hash32, { maxLength: 64 }),
  })
  .chain(({ treeSize, path }) =>
    fc.integer({ min: 0, max: treeSize - 1 }).map((leafIndex) => ({ treeSize, leafIndex, path })),
  );

/** RFC 9942's `bstr .cbor [tree_size, leaf_index, [hashes]]` content, by the generic encoder. */
const inclusionProof = (p: InclusionProof): Buffer =>
  encodeCbor([cborUint(p.treeSize), cborUint(p.leafIndex), [...p.path]]);

describe('hand-assembled CBOR', () => {
  it('cborHead / writeCborHead / cborHeadLength agree with the encoder at every size boundary', () => {
    for (const n of [0, 1, 23, 24, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
      const expected = encodeCbor(cborUint(n));
      expect(cborHead(CborMajor.uint, n).equals(expected), String(n)).toBe(true);
      expect(cborHeadLength(n)).toBe(expected.length);
      const buf = Buffer.alloc(12);
      expect(writeCborHead(buf, 1, CborMajor.uint, n)).toBe(1 + expected.length);
      expect(buf.subarray(1, 1 + expected.length).equals(expected)).toBe(true);
    }
    expect(() => cborHead(CborMajor.uint, -1)).toThrow(RangeError);
    expect(() => cborHead(CborMajor.uint, 2 ** 53)).toThrow(RangeError);
  });

  it('receiptsUnder: one buffer, consecutive views, each the generic encoding of the receipt', () => {
    const signer = logSigner();
    const root = Buffer.alloc(32, 7);
    const head = signTreeHead({ signer, issuer: 'https://log.example', root, issuedAt: 1_700_000_000 });
    fc.assert(
      fc.property(fc.array(proofArb, { minLength: 1, maxLength: 8 }), (proofs) => {
        const views = receiptsUnder(head, proofs);
        expect(views).toHaveLength(proofs.length);
        for (const [i, v] of views.entries()) {
          const expected = encodeCbor(
            new Tag(
              [
                head.signed.protectedBytes,
                new Map<number, unknown>([
                  [Header.vdp, new Map([[VDP_INCLUSION, [inclusionProof(proofs[i]!)]]])],
                ]),
                null,
                head.signed.signature,
              ],
              18,
            ),
          );
          expect(v.equals(expected)).toBe(true);
          if (i > 0) {
            const prev = views[i - 1]!;
            expect(v.buffer).toBe(prev.buffer);
            expect(v.byteOffset).toBe(prev.byteOffset + prev.length);
          }
        }
      }),
      { numRuns: 50 },
    );
    // A single receipt signs its own head: same layout.
    const single = issueReceipt({
      signer,
      issuer: 'https://log.example',
      root,
      issuedAt: 1,
      proof: { treeSize: 1, leafIndex: 0, path: [] },
    });
    expect(decodeSign1(single, 'MALFORMED_RECEIPT').payload).toBeNull();
    expect(() => receiptsUnder(head, [{ treeSize: 2, leafIndex: 0, path: [Buffer.alloc(31)] }])).toThrow(
      RangeError,
    );
  });

  it('sign1Entry copies a statement already in entry form and re-encodes anything else', () => {
    const protectedBytes = encodeCbor(new Map([[1, -7]]));
    const signature = Buffer.alloc(64, 1);
    const payload = Buffer.alloc(300, 2);
    const canonical = encodeCbor(new Tag([protectedBytes, new Map(), payload, signature], 18));
    const parsed = decodeSign1(canonical, 'MALFORMED_STATEMENT');
    const entry = sign1Entry(canonical, parsed);
    expect(entry.equals(canonical)).toBe(true);
    expect(entry.buffer).not.toBe(canonical.buffer); // a copy: the caller's buffer may be reused

    // Unprotected header present, untagged, a non-shortest length head: the entry is re-encoded.
    const withHeader = encodeCbor(
      new Tag([protectedBytes, new Map([[4, Buffer.from('kid')]]), payload, signature], 18),
    );
    const untagged = encodeCbor([protectedBytes, new Map(), payload, signature]);
    // payload length 300 written with a 4-byte argument (0x5a) instead of 2 (0x59): 2 bytes longer
    const headAt = canonical.indexOf(Buffer.from([0x59, 0x01, 0x2c]));
    expect(headAt).toBeGreaterThan(0);
    const longHead = Buffer.concat([
      canonical.subarray(0, headAt),
      Buffer.from([0x5a, 0x00, 0x00, 0x01, 0x2c]),
      canonical.subarray(headAt + 3),
    ]);
    for (const bytes of [withHeader, untagged, longHead]) {
      const s = decodeSign1(bytes, 'MALFORMED_STATEMENT');
      const e = sign1Entry(bytes, s);
      expect(e.equals(canonical)).toBe(true);
      expect(e.equals(encodeSign1(s, new Map()))).toBe(true);
    }
  });
});

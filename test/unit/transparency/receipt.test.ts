import { Tag } from 'cbor-x';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KeySigner } from '../../../src/signing/index.ts';
import { logKeyOf, type LogKey } from '../../../src/cose/key.ts';
import { isTransparencyError } from '../../../src/transparency/errors.ts';
import { leafHash, MemoryTree } from '../../../src/transparency/merkle.ts';
import {
  assertReceipt,
  attachReceipt,
  decodeReceipt,
  entryOf,
  issueReceipt,
  receiptsOf,
  verifyReceipt,
} from '../../../src/transparency/receipt.ts';
import { cbor, plain } from '../../helpers/cbor.ts';
import { logSigner, signedStatement, statementSigner } from './fixtures.ts';

/** Rebuilds a receipt with one part changed (the signature stays the original one). */
function rewrite(
  receipt: Buffer,
  change: (parts: {
    protected: Buffer;
    unprotected: Map<number, unknown>;
    payload: unknown;
    signature: Buffer;
  }) => void,
): Buffer {
  const [p, u, payload, signature] = (cbor.decode(receipt) as Tag).value as [
    Buffer,
    Map<number, unknown>,
    unknown,
    Buffer,
  ];
  const parts = { protected: p, unprotected: u, payload, signature };
  change(parts);
  return plain.encode(new Tag([parts.protected, parts.unprotected, parts.payload, parts.signature], 18));
}

function proofOf(receipt: Buffer): [number, number, Buffer[]] {
  const u = ((cbor.decode(receipt) as Tag).value as unknown[])[1] as Map<number, Map<number, Buffer[]>>;
  return cbor.decode(u.get(396)!.get(-1)![0]!) as [number, number, Buffer[]];
}

function withProof(receipt: Buffer, proof: unknown[]): Buffer {
  return rewrite(receipt, (parts) => {
    parts.unprotected = new Map([[396, new Map([[-1, [plain.encode(proof)]]])]]);
  });
}

describe('COSE receipts (RFC9162_SHA256 inclusion)', () => {
  let signer: KeySigner;
  let log: KeySigner;
  let key: LogKey;
  const statements: Buffer[] = [];
  const subjects: string[] = [];
  const tree = new MemoryTree();

  beforeAll(async () => {
    signer = await statementSigner();
    log = logSigner();
    key = logKeyOf(log.publicKey);
    for (let i = 0; i < 11; i++) {
      const { statement: s, id } = signedStatement(signer);
      statements.push(s.bytes);
      subjects.push(id);
      tree.appendLeafHash(leafHash(entryOf(s.bytes)));
    }
  });

  const receiptFor = (i: number, size = tree.size): Buffer =>
    issueReceipt({
      signer: log,
      issuer: 'https://scitt.example',
      subject: subjects[i]!,
      proof: { treeSize: size, leafIndex: i, path: tree.inclusionProof(i, size) },
      root: tree.root(size),
      issuedAt: 1_700_000_000,
    });

  it('has the RFC 9942 shape: vds 1, kid, CWT claims, vdp -1 with bstr-wrapped proofs, detached root', () => {
    const receipt = receiptFor(3);
    const [p, u, payload] = (cbor.decode(receipt) as Tag).value as [Buffer, Map<number, unknown>, unknown];
    expect(payload).toBeNull();
    const header = cbor.decode(p) as Map<number, unknown>;
    expect(header.get(1)).toBe(-7);
    expect(header.get(395)).toBe(1);
    expect(Buffer.from(header.get(4) as Buffer).equals(key.kid)).toBe(true);
    const claims = header.get(15) as Map<number, unknown>;
    expect(claims.get(1)).toBe('https://scitt.example');
    expect(claims.get(2)).toBe(subjects[3]);
    expect(claims.get(6)).toBe(1_700_000_000);
    expect((u.get(396) as Map<number, unknown>).get(-1)).toHaveLength(1);
    const [size, index, path] = proofOf(receipt);
    expect([size, index]).toEqual([11, 3]);
    expect(path.map((h) => Buffer.from(h).toString('hex'))).toEqual(
      tree.inclusionProof(3).map((h) => h.toString('hex')),
    );
  });

  it('verifies every leaf at every tree size against the key and the key set', () => {
    for (let size = 1; size <= tree.size; size++) {
      for (let i = 0; i < size; i++) {
        const r = verifyReceipt({ receipt: receiptFor(i, size), statement: statements[i]!, logKey: key });
        expect(r).toMatchObject({ ok: true, treeSize: size, leafIndex: i, issuer: 'https://scitt.example' });
        if (r.ok) expect(r.root.equals(tree.root(size))).toBe(true);
      }
    }
    const other = logKeyOf(logSigner().publicKey);
    expect(
      verifyReceipt({ receipt: receiptFor(0), statement: statements[0]!, logKey: [other, key] }).ok,
    ).toBe(true);
    expect(
      verifyReceipt({ receipt: receiptFor(0), statement: statements[0]!, logKey: log.publicKey }).ok,
    ).toBe(true);
  });

  it('ignores receipts attached to the statement (the leaf is the statement with an empty unprotected header)', () => {
    const receipt = receiptFor(5);
    const transparent = attachReceipt(statements[5]!, receipt);
    expect(receiptsOf(transparent)).toHaveLength(1);
    expect(attachReceipt(transparent, receipt).equals(transparent)).toBe(true);
    expect(verifyReceipt({ receipt, statement: transparent, logKey: key }).ok).toBe(true);
  });

  it('fails with typed codes', () => {
    const receipt = receiptFor(6);
    const check = (receiptBytes: Buffer, statement = statements[6]!, logKey: LogKey | LogKey[] = key) =>
      verifyReceipt({ receipt: receiptBytes, statement, logKey });
    const [size, index, path] = proofOf(receipt);

    // A path hash changed: the recomputed root differs, so the signature cannot verify.
    const tampered = path.map((h, j) => (j === 1 ? Buffer.alloc(32, 7) : h));
    expect(check(withProof(receipt, [size, index, tampered]))).toMatchObject({
      ok: false,
      code: 'RECEIPT_SIGNATURE_INVALID',
    });
    // Shapes RFC 9162 verification rejects outright.
    expect(check(withProof(receipt, [size, index, path.slice(1)]))).toMatchObject({
      ok: false,
      code: 'INCLUSION_PROOF_INVALID',
    });
    expect(check(withProof(receipt, [size, size, path]))).toMatchObject({
      ok: false,
      code: 'INCLUSION_PROOF_INVALID',
    });
    expect(check(withProof(receipt, [size, index, [...path, path[0]!]]))).toMatchObject({
      ok: false,
      code: 'INCLUSION_PROOF_INVALID',
    });
    // Another leaf position with the same path: wrong root.
    expect(check(withProof(receipt, [size, 7, path])).ok).toBe(false);
    // Signature altered.
    const badSig = rewrite(receipt, (parts) => {
      parts.signature = Buffer.from(parts.signature);
      parts.signature[10]! ^= 1;
    });
    expect(check(badSig)).toMatchObject({ ok: false, code: 'RECEIPT_SIGNATURE_INVALID' });
    // The receipt of another statement.
    expect(check(receiptFor(7))).toMatchObject({ ok: false, code: 'STATEMENT_MISMATCH' });
    // Another log's key.
    const stranger = logKeyOf(logSigner().publicKey);
    expect(check(receipt, statements[6], stranger)).toMatchObject({ ok: false, code: 'UNKNOWN_LOG_KEY' });
    expect(check(receipt, statements[6], [stranger])).toMatchObject({ ok: false, code: 'UNKNOWN_LOG_KEY' });
    expect(verifyReceipt({ receipt, statement: statements[6]!, logKey: stranger.key })).toMatchObject({
      ok: false,
      code: 'RECEIPT_SIGNATURE_INVALID',
    });
    // Garbage and near-misses.
    expect(check(Buffer.from('garbage'))).toMatchObject({ ok: false, code: 'MALFORMED_RECEIPT' });
    expect(check(statements[6]!)).toMatchObject({ ok: false, code: 'MALFORMED_RECEIPT' }); // no vds
    expect(
      check(
        rewrite(receipt, (parts) => {
          const h = cbor.decode(parts.protected) as Map<number, unknown>;
          h.set(395, 2);
          parts.protected = plain.encode(h);
        }),
      ),
    ).toMatchObject({ ok: false, code: 'MALFORMED_RECEIPT' });
    expect(check(withProof(receipt, [size, index, [Buffer.alloc(31)]]))).toMatchObject({
      ok: false,
      code: 'MALFORMED_RECEIPT',
    });
    expect(check(receipt, Buffer.from('not a statement'))).toMatchObject({
      ok: false,
      code: 'MALFORMED_STATEMENT',
    });
    // An attached payload that is not the recomputed root.
    expect(check(rewrite(receipt, (parts) => void (parts.payload = Buffer.alloc(32))))).toMatchObject({
      ok: false,
      code: 'INCLUSION_PROOF_INVALID',
    });
  });

  it('assertReceipt throws TransparencyError with the code', () => {
    try {
      assertReceipt({ receipt: receiptFor(1), statement: statements[2]!, logKey: key });
      expect.unreachable();
    } catch (err) {
      expect(isTransparencyError(err, 'STATEMENT_MISMATCH')).toBe(true);
    }
    expect(decodeReceipt(receiptFor(1)).proofs[0]).toMatchObject({ treeSize: 11, leafIndex: 1 });
  });
});

import type { KeyObject } from 'node:crypto';
import { coseAlgorithmOf } from '../cose/algorithms.ts';
import {
  CBOR_NIL,
  cborBytes,
  cborHead,
  cborHeadLength,
  CborMajor,
  writeCborHead,
} from '../cose/cbor-assembly.ts';
import { asBytes, asUint, decodeCbor, isMap } from '../cose/cbor.ts';
import { cwtClaimsMap, readCwtClaims } from '../cose/cwt.ts';
import { coseKid, type LogKey } from '../cose/key.ts';
import {
  COSE_SIGN1_TAG,
  encodeSign1,
  Header,
  signSign1Parts,
  verifySign1,
  type CoseSign1,
  type HeaderMap,
  type Sign1Signature,
} from '../cose/sign1.ts';
import type { Signer } from '../signing/signer.ts';
import { TransparencyError, type TransparencyErrorCode } from './errors.ts';
import { HASH_SIZE, hashesEqual, leafHash, rootFromInclusionProof } from './merkle.ts';
import { cwtClaims, decodeSign1 } from './statement.ts';
import { InvariantError } from '../errors.ts';

/**
 * COSE Receipts of inclusion for RFC9162_SHA256 (RFC 9942, draft-ietf-cose-merkle-tree-proofs):
 *
 *   18([ <<{ 1: alg, 4: kid, 395: 1, 15: { 1: log issuer, 6: iat } }>>,
 *        { 396: { -1: [ <<[ tree_size, leaf_index, [ hash, ... ] ]>> ] } },
 *        nil,                       / detached: the Merkle root of tree_size leaves /
 *        signature ])
 *
 * The signature covers the protected header and the root only, so it is a signed tree head: the
 * local log signs once per commit batch and every entry of the batch gets that signature with its
 * own inclusion proof (see signTreeHead). Receipts from other services may carry a CWT `sub`; the
 * verifier accepts them when it names the statement's subject.
 *
 * The leaf ("entry" in RFC 9942 terms) is the registered signed statement with its unprotected
 * header emptied, as the SCITT architecture requires before a statement enters the log (so that
 * receipts later attached under label 394 do not change it): entry = 18([protected, {}, payload,
 * signature]) in preferred CBOR serialisation, leaf hash = SHA-256(0x00 || entry). A verifier
 * holding a transparent statement recomputes it by clearing the unprotected header.
 *
 * Verification follows RFC 9942 §5.2.1: apply the proof to the entry to get a root, then check the
 * signature over that root. A wrong path hash and a wrong signature are indistinguishable by
 * design (both just fail the signature); a path that cannot fit its size/index fails before.
 */

/** COSE Verifiable Data Structure RFC9162_SHA256. */
export const VDS_RFC9162_SHA256 = 1;
/** Proof labels inside `vdp` for RFC9162_SHA256. */
export const VDP_INCLUSION = -1;

export interface InclusionProof {
  readonly treeSize: number;
  readonly leafIndex: number;
  readonly path: readonly Buffer[];
}

/**
 * The log entry of a statement: COSE_Sign1_Tagged with an empty unprotected header, in preferred
 * serialisation (what `encodeSign1(sign1, new Map())` writes). When the input already is exactly
 * that — tagged, unprotected header empty, and as long as the shortest encoding of its parts
 * (any longer head, indefinite length or extra byte would show in the length) — its bytes are
 * copied instead of re-encoded (every statement the log appends; ADR 0006).
 */
export function sign1Entry(bytes: Uint8Array, sign1: CoseSign1): Buffer {
  const item = (n: number): number => cborHeadLength(n) + n;
  const shortest =
    2 +
    item(sign1.protectedBytes.length) +
    1 +
    (sign1.payload === null ? 1 : item(sign1.payload.length)) +
    item(sign1.signature.length);
  if (sign1.unprotectedHeader.size === 0 && bytes[0] === 0xd2 && bytes.length === shortest) {
    return Buffer.from(bytes);
  }
  return encodeSign1(sign1, new Map());
}

/** The log entry of a signed statement: COSE_Sign1_Tagged with an empty unprotected header. */
export function entryOf(statement: Uint8Array): Buffer {
  return sign1Entry(statement, decodeSign1(statement, 'MALFORMED_STATEMENT'));
}

/** RFC 9162 leaf hash of a statement's entry. */
export function statementLeafHash(statement: Uint8Array): Buffer {
  return leafHash(entryOf(statement));
}

/** `{ 396: { -1: [ ` … the unprotected header of a receipt with one inclusion proof. */
const VDP_ONE_PROOF = Buffer.concat([
  cborHead(CborMajor.map, 1),
  cborHead(CborMajor.uint, Header.vdp),
  cborHead(CborMajor.map, 1),
  Buffer.from([0x20]), // -1 (VDP_INCLUSION): major type 1, argument 0
  cborHead(CborMajor.array, 1),
]);

export interface TreeHeadInput {
  /** The log key. */
  readonly signer: Signer;
  /** The transparency service's issuer identity (CWT iss), e.g. its base URL. */
  readonly issuer: string;
  /** MTH of the tree the receipts prove inclusion in: what gets signed (detached). */
  readonly root: Buffer;
  /** Registration time, seconds since the epoch. */
  readonly issuedAt?: number;
  /**
   * CWT sub. The log's own receipts leave it out: one signature covers every entry of a commit
   * batch, and the statement is bound by the inclusion proof of its leaf, not by a label.
   */
  readonly subject?: string;
}

/**
 * A signed tree head in receipt form: the protected header and the signature over the root. Every
 * receipt for that tree shares it and differs only in the unprotected inclusion proof (RFC 9942
 * §5.2: the proof is not signed, the root it leads to is), so a batch of n entries costs one
 * signature, as a Certificate Transparency log signs one tree head per batch.
 */
export interface SignedTreeHead {
  readonly signed: Sign1Signature;
}

export function signTreeHead(input: TreeHeadInput): SignedTreeHead {
  const claims = cwtClaimsMap({ issuer: input.issuer, subject: input.subject, issuedAt: input.issuedAt });
  const protectedHeader: HeaderMap = new Map<number, unknown>([
    [Header.alg, coseAlgorithmOf(input.signer.algorithm)],
    [Header.kid, coseKid(input.signer.publicKey)],
    [Header.vds, VDS_RFC9162_SHA256],
    [Header.cwtClaims, claims],
  ]);
  return { signed: signSign1Parts(input.signer, protectedHeader, input.root) };
}

/** Bytes of a 32-byte hash inside a proof: bstr head (0x58 0x20) + hash. */
const PATH_ITEM = 2 + HASH_SIZE;

/**
 * The receipts of many entries under one signed tree head (a commit batch of the log), written
 * into ONE buffer (one allocation per batch instead of a dozen small buffers per receipt): the
 * results are consecutive views of it. Each is the generic CBOR encoding of its receipt (unit-tested).
 */
export function receiptsUnder(head: SignedTreeHead, proofs: readonly InclusionProof[]): Buffer[] {
  const { protectedBytes, signature } = head.signed;
  const prefix = Buffer.concat([
    cborHead(CborMajor.tag, COSE_SIGN1_TAG),
    cborHead(CborMajor.array, 4),
    ...cborBytes(protectedBytes),
    VDP_ONE_PROOF,
  ]);
  const suffix = Buffer.concat([CBOR_NIL, ...cborBytes(signature)]);
  const bodyLength = (p: InclusionProof): number =>
    1 +
    cborHeadLength(p.treeSize) +
    cborHeadLength(p.leafIndex) +
    cborHeadLength(p.path.length) +
    p.path.length * PATH_ITEM;
  let total = 0;
  for (const p of proofs) {
    const body = bodyLength(p);
    total += prefix.length + cborHeadLength(body) + body + suffix.length;
  }
  const out = Buffer.allocUnsafe(total);
  const views: Buffer[] = [];
  let at = 0;
  for (const p of proofs) {
    const begin = at;
    at += prefix.copy(out, at);
    at = writeCborHead(out, at, CborMajor.bytes, bodyLength(p));
    at = writeCborHead(out, at, CborMajor.array, 3);
    at = writeCborHead(out, at, CborMajor.uint, p.treeSize);
    at = writeCborHead(out, at, CborMajor.uint, p.leafIndex);
    at = writeCborHead(out, at, CborMajor.array, p.path.length);
    for (const h of p.path) {
      if (h.length !== HASH_SIZE) throw new RangeError(`an inclusion path hash has ${h.length} bytes`);
      out[at] = 0x58;
      out[at + 1] = HASH_SIZE;
      at += 2 + h.copy(out, at + 2);
    }
    at += suffix.copy(out, at);
    views.push(out.subarray(begin, at));
  }
  if (at !== total) throw new InvariantError(`receipt block: wrote ${at} of ${total} bytes`);
  return views;
}

export interface ReceiptInput extends TreeHeadInput {
  readonly proof: InclusionProof;
}

/** One receipt with its own signature (a tree head signed for a single proof). */
export function issueReceipt(input: ReceiptInput): Buffer {
  return receiptsUnder(signTreeHead(input), [input.proof])[0]!;
}

export interface DecodedReceipt {
  readonly sign1: CoseSign1;
  readonly kid: Buffer | undefined;
  readonly issuer: string | undefined;
  readonly subject: string | undefined;
  readonly issuedAt: number | undefined;
  /** At least one; each must lead to the same root. */
  readonly proofs: readonly InclusionProof[];
}

function malformed(why: string): never {
  throw new TransparencyError('MALFORMED_RECEIPT', `malformed receipt: ${why}`);
}

function decodeProof(item: unknown): InclusionProof {
  // RFC 9942 wraps each proof in a byte string; early drafts (and some services) did not.
  let value: unknown = item;
  const wrapped = asBytes(item);
  if (wrapped !== undefined) {
    try {
      value = decodeCbor(wrapped);
    } catch {
      malformed('an inclusion proof is not CBOR');
    }
  }
  if (!Array.isArray(value) || value.length !== 3) malformed('an inclusion proof is not [size, index, path]');
  const [size, index, path] = value as unknown[];
  const treeSize = asUint(size);
  const leafIndex = asUint(index);
  if (treeSize === undefined || leafIndex === undefined) malformed('tree size or leaf index is not a uint');
  if (!Array.isArray(path)) malformed('inclusion path is not an array');
  const hashes = (path as unknown[]).map((h) => {
    const b = asBytes(h);
    if (b === undefined || b.length !== HASH_SIZE) malformed('an inclusion path hash is not 32 bytes');
    return b;
  });
  return { treeSize, leafIndex, path: hashes };
}

/** Parses a receipt; throws TransparencyError MALFORMED_RECEIPT. */
export function decodeReceipt(bytes: Uint8Array): DecodedReceipt {
  const sign1 = decodeSign1(bytes, 'MALFORMED_RECEIPT');
  if (sign1.protectedHeader.get(Header.vds) !== VDS_RFC9162_SHA256)
    malformed('protected vds is not 1 (RFC9162_SHA256)');
  const vdp = sign1.unprotectedHeader.get(Header.vdp);
  if (!isMap(vdp)) malformed('unprotected header has no vdp (396) map');
  const inclusion = vdp.get(VDP_INCLUSION);
  if (!Array.isArray(inclusion) || inclusion.length === 0) malformed('vdp has no inclusion proofs (-1)');
  const proofs = (inclusion as unknown[]).map(decodeProof);
  // Receipt claims are each optional (a statement needs iss and sub; a receipt needs neither).
  const claims = readCwtClaims(sign1.protectedHeader);
  return {
    sign1,
    kid: asBytes(sign1.protectedHeader.get(Header.kid)),
    issuer: claims.issuer,
    subject: claims.subject,
    issuedAt: claims.issuedAt,
    proofs,
  };
}

export type ReceiptProblemCode = Extract<
  TransparencyErrorCode,
  | 'MALFORMED_RECEIPT'
  | 'MALFORMED_STATEMENT'
  | 'INCLUSION_PROOF_INVALID'
  | 'RECEIPT_SIGNATURE_INVALID'
  | 'STATEMENT_MISMATCH'
  | 'UNKNOWN_LOG_KEY'
>;

export type ReceiptVerification =
  | {
      readonly ok: true;
      readonly treeSize: number;
      readonly leafIndex: number;
      readonly root: Buffer;
      readonly leafHash: Buffer;
      readonly kid: Buffer | undefined;
      readonly issuer: string | undefined;
      readonly subject: string | undefined;
      readonly issuedAt: number | undefined;
    }
  | { readonly ok: false; readonly code: ReceiptProblemCode; readonly message: string };

export interface VerifyReceiptInput {
  readonly receipt: Uint8Array;
  /** The signed statement (its unprotected header, e.g. attached receipts, is ignored). */
  readonly statement: Uint8Array;
  /** The log key, or the log's key set (matched by the receipt's kid). */
  readonly logKey: KeyObject | LogKey | readonly LogKey[];
}

function pickKey(logKey: VerifyReceiptInput['logKey'], kid: Buffer | undefined): KeyObject | undefined {
  if (Array.isArray(logKey)) {
    const keys = logKey as readonly LogKey[];
    if (kid === undefined) return keys.length === 1 ? keys[0]!.key : undefined;
    return keys.find((k) => k.kid.equals(kid))?.key;
  }
  if ('kid' in logKey && 'key' in logKey) {
    return kid === undefined || logKey.kid.equals(kid) ? logKey.key : undefined;
  }
  return logKey as KeyObject;
}

/**
 * Verifies that `receipt` proves `statement` included in the log whose key is `logKey`. Returns a
 * result with a typed code; never throws for bad input.
 */
export function verifyReceipt(input: VerifyReceiptInput): ReceiptVerification {
  const fail = (code: ReceiptProblemCode, message: string): ReceiptVerification => ({
    ok: false,
    code,
    message,
  });
  let receipt: DecodedReceipt;
  try {
    receipt = decodeReceipt(input.receipt);
  } catch (err) {
    return fail('MALFORMED_RECEIPT', (err as Error).message);
  }
  let entry: Buffer;
  let statement: CoseSign1;
  try {
    statement = decodeSign1(input.statement, 'MALFORMED_STATEMENT');
    entry = sign1Entry(input.statement, statement);
  } catch (err) {
    return fail('MALFORMED_STATEMENT', (err as Error).message);
  }
  const key = pickKey(input.logKey, receipt.kid);
  if (key === undefined) {
    return fail('UNKNOWN_LOG_KEY', `no log key has kid ${receipt.kid?.toString('hex') ?? '(none)'}`);
  }
  const leaf = leafHash(entry);
  let root: Buffer | undefined;
  for (const proof of receipt.proofs) {
    const r = rootFromInclusionProof(leaf, proof.leafIndex, proof.treeSize, proof.path);
    if (r === undefined) {
      return fail(
        'INCLUSION_PROOF_INVALID',
        `the inclusion path does not fit leaf ${proof.leafIndex} of a tree of size ${proof.treeSize}`,
      );
    }
    if (root !== undefined && !hashesEqual(root, r))
      return fail('INCLUSION_PROOF_INVALID', 'the inclusion proofs lead to different roots');
    root = r;
  }
  if (root === undefined) return fail('MALFORMED_RECEIPT', 'no inclusion proof');
  if (receipt.sign1.payload !== null && !hashesEqual(receipt.sign1.payload, root)) {
    return fail('INCLUSION_PROOF_INVALID', 'the attached payload is not the root the proof leads to');
  }
  if (!verifySign1(receipt.sign1, key, root)) {
    // Only a diagnosis: the cryptographic check is what decides. A receipt whose signature holds
    // for this statement is accepted whatever its `sub` says (services label receipts differently).
    const statementSub = cwtClaims(statement.protectedHeader)?.subject;
    if (receipt.subject !== undefined && statementSub !== undefined && receipt.subject !== statementSub) {
      return fail(
        'STATEMENT_MISMATCH',
        `the receipt is about subject ${receipt.subject}, the statement about ${statementSub}`,
      );
    }
    return fail(
      'RECEIPT_SIGNATURE_INVALID',
      'the receipt signature does not verify over the root recomputed from this statement and proof ' +
        '(a receipt for another statement, a changed proof, or another key)',
    );
  }
  const first = receipt.proofs[0]!;
  return {
    ok: true,
    treeSize: first.treeSize,
    leafIndex: first.leafIndex,
    root,
    leafHash: leaf,
    kid: receipt.kid,
    issuer: receipt.issuer,
    subject: receipt.subject,
    issuedAt: receipt.issuedAt,
  };
}

/** {@link verifyReceipt} that throws TransparencyError with the problem's code. */
export function assertReceipt(input: VerifyReceiptInput): Extract<ReceiptVerification, { ok: true }> {
  const result = verifyReceipt(input);
  if (!result.ok) throw new TransparencyError(result.code, result.message);
  return result;
}

/**
 * A transparent statement: the signed statement with `receipts` (394) in its unprotected header,
 * each receipt a byte string. Receipts already attached are kept; an identical one is not added
 * twice.
 */
export function attachReceipt(statement: Uint8Array, receipt: Uint8Array): Buffer {
  const sign1 = decodeSign1(statement, 'MALFORMED_STATEMENT');
  const existing = sign1.unprotectedHeader.get(Header.receipts);
  const receipts = Array.isArray(existing)
    ? (existing as unknown[]).map(asBytes).filter((b): b is Buffer => b !== undefined)
    : [];
  if (!receipts.some((r) => r.equals(receipt))) receipts.push(Buffer.from(receipt));
  const unprotected: HeaderMap = new Map(sign1.unprotectedHeader);
  unprotected.set(Header.receipts, receipts);
  return encodeSign1(sign1, unprotected);
}

/** The receipts attached to a transparent statement. */
export function receiptsOf(statement: Uint8Array): Buffer[] {
  const value = decodeSign1(statement, 'MALFORMED_STATEMENT').unprotectedHeader.get(Header.receipts);
  if (!Array.isArray(value)) return [];
  return (value as unknown[]).map(asBytes).filter((b): b is Buffer => b !== undefined);
}

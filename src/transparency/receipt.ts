import type { KeyObject } from 'node:crypto';
import type { Signer } from '../signing/signer.ts';
import { asBytes, asUint, cborUint, decodeCbor, encodeCbor, isMap } from './cbor.ts';
import {
  Claim,
  coseAlgorithmOf,
  coseKid,
  cwtClaims,
  decodeSign1,
  encodeSign1,
  Header,
  signSign1,
  verifySign1,
  type CoseSign1,
  type HeaderMap,
  type LogKey,
} from './cose.ts';
import { TransparencyError, type TransparencyErrorCode } from './errors.ts';
import { HASH_SIZE, hashesEqual, leafHash, rootFromInclusionProof } from './merkle.ts';

/**
 * COSE Receipts of inclusion for RFC9162_SHA256 (RFC 9942, draft-ietf-cose-merkle-tree-proofs):
 *
 *   18([ <<{ 1: alg, 4: kid, 395: 1, 15: { 1: log issuer, 2: statement sub, 6: iat } }>>,
 *        { 396: { -1: [ <<[ tree_size, leaf_index, [ hash, ... ] ]>> ] } },
 *        nil,                       / detached: the Merkle root of tree_size leaves /
 *        signature ])
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

/** The log entry of a signed statement: COSE_Sign1_Tagged with an empty unprotected header. */
export function entryOf(statement: Uint8Array): Buffer {
  return encodeSign1(decodeSign1(statement, 'MALFORMED_STATEMENT'), new Map());
}

/** RFC 9162 leaf hash of a statement's entry. */
export function statementLeafHash(statement: Uint8Array): Buffer {
  return leafHash(entryOf(statement));
}

/** `[tree_size, leaf_index, [hashes]]` wrapped in a byte string (`bstr .cbor`), per RFC 9942. */
export function encodeInclusionProof(proof: InclusionProof): Buffer {
  return encodeCbor([cborUint(proof.treeSize), cborUint(proof.leafIndex), [...proof.path]]);
}

export interface ReceiptInput {
  /** The log key. */
  readonly signer: Signer;
  /** The transparency service's issuer identity (CWT iss), e.g. its base URL. */
  readonly issuer: string;
  /** CWT sub: the statement's own sub (SCITT: the receipt is about the same subject). */
  readonly subject: string;
  readonly proof: InclusionProof;
  /** MTH of the first `proof.treeSize` leaves: what gets signed (detached). */
  readonly root: Buffer;
  /** Registration time, seconds since the epoch. */
  readonly issuedAt?: number;
}

export function issueReceipt(input: ReceiptInput): Buffer {
  const claims = new Map<number, unknown>([
    [Claim.iss, input.issuer],
    [Claim.sub, input.subject],
  ]);
  if (input.issuedAt !== undefined) claims.set(Claim.iat, cborUint(input.issuedAt));
  const protectedHeader: HeaderMap = new Map<number, unknown>([
    [Header.alg, coseAlgorithmOf(input.signer.algorithm)],
    [Header.kid, coseKid(input.signer.publicKey)],
    [Header.vds, VDS_RFC9162_SHA256],
    [Header.cwtClaims, claims],
  ]);
  const unprotectedHeader: HeaderMap = new Map<number, unknown>([
    [Header.vdp, new Map<number, unknown>([[VDP_INCLUSION, [encodeInclusionProof(input.proof)]]])],
  ]);
  return signSign1(input.signer, { protectedHeader, unprotectedHeader, payload: input.root, detached: true });
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
  const claims = cwtClaims(sign1.protectedHeader);
  const rawClaims = sign1.protectedHeader.get(Header.cwtClaims);
  const iat = isMap(rawClaims) ? asUint(rawClaims.get(Claim.iat)) : undefined;
  return {
    sign1,
    kid: asBytes(sign1.protectedHeader.get(Header.kid)),
    issuer: claims?.issuer,
    subject: claims?.subject,
    issuedAt: iat,
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
    entry = encodeSign1(statement, new Map());
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
      'the receipt signature does not verify over the root recomputed from this statement and proof',
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

import { BaseError } from '../errors.ts';

/**
 * Typed failures of the C2PA module (BaseError, src/errors.ts): callers and tests
 * branch on `code`; a verification result lists every problem found, not only the first.
 */

export type C2paProblemCode =
  /** Not a C2PA manifest store we can read: JUMBF structure, CBOR, claim or COSE fields wrong or missing. */
  | 'MALFORMED_MANIFEST'
  /** The `c2pa.hash.data` hash does not match the asset bytes. */
  | 'DATA_HASH_MISMATCH'
  /** A hashed URI in the claim does not match its assertion box, or names an assertion that is not there. */
  | 'ASSERTION_HASH_MISMATCH'
  /** The COSE_Sign1 signature does not verify over the claim with the leaf certificate's key. */
  | 'SIGNATURE_INVALID'
  /** The x5chain does not lead to a trust anchor, or the leaf is not acceptable as a C2PA signer. */
  | 'UNTRUSTED_SIGNER'
  /** A certificate on the chain is outside its validity period at verification time (no trusted time-stamp). */
  | 'CERTIFICATE_EXPIRED'
  /**
   * The `sigTst` time-stamp is damaged or is not for this claim signature (message imprint,
   * CMS signature or structure): evidence of tampering, whatever the TSA's trust.
   */
  | 'TIMESTAMP_INVALID'
  /** A trusted time-stamp shows the claim was signed while a certificate of the chain was not valid. */
  | 'TIMESTAMP_OUTSIDE_VALIDITY'
  /** The manifest is valid but is not ours (no attestation assertion), or the signing algorithm is unsupported. */
  | 'UNSUPPORTED_MANIFEST';

export interface C2paProblem {
  code: C2paProblemCode;
  message: string;
}

/** Thrown while building (bad input or signer) and used internally while parsing. */
export class C2paError extends BaseError<C2paProblemCode | 'INVALID_INPUT'> {}

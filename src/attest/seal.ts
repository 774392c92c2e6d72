import { signatureMetadata, type SignatureMetadata, type Signer } from '../signing/signer.ts';
import { signedEnvelopeDigest } from './digest.ts';
import { signStatement, type DsseEnvelope } from './dsse.ts';
import type { Statement } from './statement.ts';

/** What the vault stores for one attestation (besides its id and chain link). */
export interface SealedAttestation {
  envelope: DsseEnvelope;
  /** `sha256:<hex>` over the JCS canonical JSON of `envelope` (docs/digest.md). */
  digest: string;
  signature: SignatureMetadata;
}

/**
 * statement → signed DSSE envelope → digest, in one pure call. The digest is envelopeDigest's
 * (docs/digest.md), computed on the fast path for an envelope signStatement just made.
 */
export function sealStatement(statement: Statement, signer: Signer): SealedAttestation {
  const envelope = signStatement(statement, signer);
  return { envelope, digest: signedEnvelopeDigest(envelope), signature: signatureMetadata(signer) };
}

import type { KeyObject, X509Certificate } from 'node:crypto';
import { canonicalJson } from '../attest/json.ts';
import { keyIdOf, type Signer } from '../signing/signer.ts';
import { isTransparencyError } from '../transparency/errors.ts';
import { buildPayloadStatement, verifySignedStatement } from '../transparency/statement.ts';
import { CheckpointError } from './errors.ts';

/**
 * A signed checkpoint of the vault (ADR 0008): a SCITT signed statement (COSE_Sign1, x5chain,
 * CWT iss = did:x509 of the service signer, sub = {@link CHECKPOINT_SUBJECT}) whose payload is the
 * RFC 8785 JSON
 *
 *   {"issued_at", "last_id", "root_hash" (hex), "tree_size", "type": CHECKPOINT_TYPE}
 *
 * Being a signed statement, it registers in the transparency log as it is.
 */

export const CHECKPOINT_TYPE = 'https://vault.service.dev/chain/checkpoint/v1';
export const CHECKPOINT_CONTENT_TYPE = 'application/vnd.aibom-vault.checkpoint+json';
/** The CWT subject of every checkpoint. */
export const CHECKPOINT_SUBJECT = 'vault.service.dev/checkpoint';

export interface Checkpoint {
  /** Records covered: seq 1..treeSize. */
  readonly treeSize: number;
  /** RFC 9162 MTH of their leaves. */
  readonly rootHash: Buffer;
  /** Id of the record at seq = treeSize. */
  readonly lastId: string;
  /** RFC 3339. */
  readonly issuedAt: string;
}

export function checkpointPayload(c: Checkpoint): Buffer {
  return Buffer.from(
    canonicalJson({
      issued_at: c.issuedAt,
      last_id: c.lastId,
      root_hash: c.rootHash.toString('hex'),
      tree_size: c.treeSize,
      type: CHECKPOINT_TYPE,
    }),
    'utf8',
  );
}

/** Signs a checkpoint with the service signer (which needs its certificate chain). */
export function signCheckpoint(
  c: Checkpoint,
  signer: Signer,
  caCertificates: readonly X509Certificate[] = [],
): Buffer {
  return buildPayloadStatement({
    subject: CHECKPOINT_SUBJECT,
    payload: checkpointPayload(c),
    contentType: CHECKPOINT_CONTENT_TYPE,
    signer,
    caCertificates,
    issuedAt: Math.floor(Date.parse(c.issuedAt) / 1000),
  }).bytes;
}

/** Whom a verifier trusts to sign checkpoints: the service signer's key, or its CA. */
export type CheckpointTrust =
  | { readonly publicKeys: readonly KeyObject[] }
  | { readonly trustAnchors: readonly X509Certificate[]; readonly at?: Date };

const HEX32 = /^[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Verifies a checkpoint statement and returns what it signs. Throws CheckpointError
 * CHECKPOINT_SIGNATURE_INVALID (signature, did:x509 binding, or a signer other than the trusted
 * one) or CHECKPOINT_INVALID (not a vault checkpoint).
 */
export function verifyCheckpoint(bytes: Uint8Array, trust: CheckpointTrust): Checkpoint {
  let verified: ReturnType<typeof verifySignedStatement>;
  try {
    verified = verifySignedStatement(
      bytes,
      'trustAnchors' in trust
        ? { trustAnchors: trust.trustAnchors, ...(trust.at !== undefined ? { at: trust.at } : {}) }
        : {},
    );
  } catch (err) {
    if (!isTransparencyError(err)) throw err;
    const code = err.code === 'MALFORMED_STATEMENT' ? 'CHECKPOINT_INVALID' : 'CHECKPOINT_SIGNATURE_INVALID';
    throw new CheckpointError(code, `checkpoint: ${err.message}`, { cause: err });
  }
  if ('publicKeys' in trust) {
    const signedBy = keyIdOf(verified.chain[0]!.publicKey);
    if (!trust.publicKeys.some((k) => keyIdOf(k) === signedBy)) {
      throw new CheckpointError(
        'CHECKPOINT_SIGNATURE_INVALID',
        `checkpoint signed by ${signedBy}, which is not a trusted key`,
      );
    }
  }
  const invalid = (why: string): never => {
    throw new CheckpointError('CHECKPOINT_INVALID', `not a vault checkpoint: ${why}`);
  };
  if (verified.subject !== CHECKPOINT_SUBJECT) invalid(`subject ${verified.subject}`);
  if (verified.contentType !== CHECKPOINT_CONTENT_TYPE)
    invalid(`content type ${String(verified.contentType)}`);
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(verified.payload.toString('utf8')) as Record<string, unknown>;
  } catch {
    return invalid('payload is not JSON');
  }
  const { type, tree_size: size, root_hash: root, last_id: lastId, issued_at: issuedAt } = body;
  if (type !== CHECKPOINT_TYPE) invalid(`type ${String(type)}`);
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1) invalid('tree_size');
  if (typeof root !== 'string' || !HEX32.test(root)) invalid('root_hash');
  if (typeof lastId !== 'string' || !UUID.test(lastId)) invalid('last_id');
  if (typeof issuedAt !== 'string' || Number.isNaN(Date.parse(issuedAt))) invalid('issued_at');
  return {
    treeSize: size as number,
    rootHash: Buffer.from(root as string, 'hex'),
    lastId: lastId as string,
    issuedAt: issuedAt as string,
  };
}

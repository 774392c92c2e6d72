import { generateKeyPairSync, randomUUID } from 'node:crypto';
import {
  envelopeDigest,
  makeStatement,
  signStatement,
  type DsseEnvelope,
} from '../../../src/attest/index.ts';
import { generateDevPki, type DevPkiOptions } from '../../../hack/dev-pki.ts';
import { createKeySigner, signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { buildSignedStatement, type SignedStatement } from '../../../src/transparency/statement.ts';

/** Generated per test run; no key is ever committed. */
export async function statementSigner(options: DevPkiOptions = {}): Promise<KeySigner> {
  return signerFromPem(await generateDevPki(options));
}

/** A bare log key (no certificate): receipts need none. */
export function logSigner(type: 'ec' | 'ed25519' = 'ec'): KeySigner {
  const { privateKey } =
    type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519');
  return createKeySigner({ privateKey });
}

/** A signed DSSE envelope around a small in-toto statement, and its vault digest. */
export function envelope(
  signer: KeySigner,
  label = randomUUID(),
): { envelope: DsseEnvelope; digest: string } {
  const statement = makeStatement(
    [{ name: `run:${label}`, digest: { sha256: 'ab'.repeat(32) } }],
    'https://vault.service.dev/attestations/test/v1',
    { label },
  );
  const env = signStatement(statement, signer);
  return { envelope: env, digest: envelopeDigest(env) };
}

/** A signed statement over a fresh envelope, as the publisher builds it (root CA pinned). */
export function signedStatement(signer: KeySigner): {
  statement: SignedStatement;
  id: string;
  digest: string;
} {
  const { envelope: env, digest } = envelope(signer);
  const id = attestationId();
  const statement = buildSignedStatement({
    attestationId: id,
    envelope: env,
    digest,
    signer,
    caCertificates: signer.caCertificates,
  });
  return { statement, id, digest };
}

/** A UUIDv7-shaped id (tests only need the shape). */
export function attestationId(): string {
  const u = randomUUID();
  return `${u.slice(0, 14)}7${u.slice(15)}`;
}

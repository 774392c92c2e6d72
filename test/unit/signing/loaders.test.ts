import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createHash, createPrivateKey, generateKeyPairSync, verify } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki, toSecretData, type DevPki } from '../../../hack/dev-pki.ts';
import { SigningError, type SigningErrorCode } from '../../../src/signing/errors.ts';
import { createKeySigner } from '../../../src/signing/key-signer.ts';
import { signatureMetadata } from '../../../src/signing/signer.ts';
import { loadSignerFromFiles, signerFromPem, signerFromTlsSecretData } from '../../../src/signing/tls.ts';

const DAY = 86_400_000;

function codeOf(fn: () => unknown): SigningErrorCode | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SigningError);
    return (err as SigningError).code;
  }
  return undefined;
}

let p256: DevPki;
let ed25519: DevPki;
let other: DevPki;
let dir: string;

beforeAll(async () => {
  [p256, ed25519, other] = await Promise.all([
    generateDevPki({ intermediate: true }),
    generateDevPki({ leafAlgorithm: 'ED25519' }),
    generateDevPki(),
  ]);
  dir = await mkdtemp(join(tmpdir(), 'signing-test-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('loading signers', () => {
  it.each([
    ['ECDSA P-256 with intermediate', () => p256, 'ECDSA_P256_SHA256', 2],
    ['Ed25519', () => ed25519, 'ED25519', 1],
  ] as const)('%s from a kubernetes.io/tls Secret data object', (_name, pki, algorithm, chainLength) => {
    const signer = signerFromTlsSecretData(toSecretData(pki()));
    expect(signer.algorithm).toBe(algorithm);
    expect(signer.certificateChain).toHaveLength(chainLength);
    expect(signer.caCertificates).toHaveLength(1);
    const data = Buffer.from('attest me');
    expect(verify(algorithm === 'ED25519' ? null : 'sha256', data, signer.publicKey, signer.sign(data))).toBe(
      true,
    );
  });

  it('from files, with the same key id as from the Secret', async () => {
    const paths = {
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      caFile: join(dir, 'ca.crt'),
    };
    await writeFile(paths.certFile, p256['tls.crt']);
    await writeFile(paths.keyFile, p256['tls.key'], { mode: 0o600 });
    await writeFile(paths.caFile, p256['ca.crt']);
    const fromFiles = await loadSignerFromFiles(paths);
    expect(fromFiles.keyId).toBe(signerFromTlsSecretData(toSecretData(p256)).keyId);
    const missing = loadSignerFromFiles({ ...paths, keyFile: join(dir, 'nope.key') });
    await expect(missing).rejects.toMatchObject({ code: 'MISSING_MATERIAL' });
    await expect(missing).rejects.toHaveProperty('cause.code', 'ENOENT');
  });

  it('key id is sha256 of the SPKI DER, computed independently from the certificate', () => {
    const signer = signerFromPem(p256);
    const leaf = new x509.X509Certificate(p256['tls.crt']); // first PEM block = leaf
    const spki = Buffer.from(leaf.publicKey.rawData);
    expect(signer.keyId).toBe(`sha256:${createHash('sha256').update(spki).digest('hex')}`);
    expect(signatureMetadata(signer)).toEqual({
      algorithm: 'ECDSA_P256_SHA256',
      key_id: signer.keyId,
      cert_chain_ref: `sha256:${createHash('sha256').update(Buffer.from(leaf.rawData)).digest('hex')}`,
    });
    expect(signatureMetadata(signer)).toBe(signatureMetadata(signer)); // computed once
  });

  it('accepts a SEC1 "EC PRIVATE KEY" and no ca.crt', () => {
    const sec1 = createPrivateKey(p256['tls.key']).export({ type: 'sec1', format: 'pem' });
    expect(sec1).toContain('BEGIN EC PRIVATE KEY');
    const signer = signerFromPem({ 'tls.crt': p256['tls.crt'], 'tls.key': sec1 });
    expect(signer.keyId).toBe(signerFromPem(p256).keyId);
    expect(signer.caCertificates).toEqual([]);
  });
});

describe('rejecting unusable material with typed errors', () => {
  it('unsupported key types', () => {
    for (const privateKey of [
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
      generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey,
      generateKeyPairSync('ed448').privateKey,
    ]) {
      expect(codeOf(() => createKeySigner({ privateKey }))).toBe('UNSUPPORTED_KEY_TYPE');
    }
    const publicOnly = generateKeyPairSync('ed25519').publicKey;
    expect(codeOf(() => createKeySigner({ privateKey: publicOnly }))).toBe('UNSUPPORTED_KEY_TYPE');
  });

  it('key not matching the leaf certificate', () => {
    expect(codeOf(() => signerFromPem({ ...p256, 'tls.key': other['tls.key'] }))).toBe('KEY_CERT_MISMATCH');
    expect(codeOf(() => signerFromPem({ ...ed25519, 'tls.key': other['tls.key'] }))).toBe(
      'KEY_CERT_MISMATCH',
    );
  });

  it('chain not leading to ca.crt, or tls.crt out of order', () => {
    expect(codeOf(() => signerFromPem({ ...p256, 'ca.crt': other['ca.crt'] }))).toBe('CHAIN_INVALID');
    const [leafPem, intermediatePem] =
      p256['tls.crt'].match(/-----BEGIN[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    const reversed = `${intermediatePem}\n${leafPem}\n`;
    expect(codeOf(() => signerFromPem({ ...p256, 'tls.crt': reversed }))).toBe('KEY_CERT_MISMATCH');
    const withoutCa = { 'tls.crt': `${leafPem}\n${other['ca.crt']}`, 'tls.key': p256['tls.key'] };
    expect(codeOf(() => signerFromPem(withoutCa))).toBe('CHAIN_INVALID');
  });

  it('expired or not yet valid certificates at load time', async () => {
    const now = Date.now();
    const pki = await generateDevPki({
      caNotBefore: new Date(now - 10 * DAY),
      notBefore: new Date(now - 3 * DAY),
      notAfter: new Date(now - DAY),
    });
    expect(codeOf(() => signerFromPem(pki))).toBe('CERTIFICATE_EXPIRED');
    expect(codeOf(() => signerFromPem(pki, { at: new Date(now - 5 * DAY) }))).toBe(
      'CERTIFICATE_NOT_YET_VALID',
    );
    expect(codeOf(() => signerFromPem(pki, { at: new Date(now - 2 * DAY) }))).toBeUndefined();
  });

  it('missing, non-base64 and malformed fields', () => {
    const data = toSecretData(p256);
    expect(codeOf(() => signerFromTlsSecretData({ ...data, 'tls.key': undefined }))).toBe('MISSING_MATERIAL');
    expect(codeOf(() => signerFromTlsSecretData({ ...data, 'tls.crt': '' }))).toBe('MISSING_MATERIAL');
    expect(codeOf(() => signerFromTlsSecretData({ ...data, 'tls.crt': 'not base64!' }))).toBe(
      'MISSING_MATERIAL',
    );
    expect(codeOf(() => signerFromPem({ ...p256, 'tls.crt': 'garbage' }))).toBe('MALFORMED_CERTIFICATE');
    const brokenCert = p256['tls.crt'].replace(/^(-----BEGIN CERTIFICATE-----\n)MII/, '$1AAA');
    expect(codeOf(() => signerFromPem({ ...p256, 'tls.crt': brokenCert }))).toBe('MALFORMED_CERTIFICATE');
    expect(codeOf(() => signerFromPem({ ...p256, 'tls.key': 'garbage' }))).toBe('MALFORMED_KEY');
  });
});

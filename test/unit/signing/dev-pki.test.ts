import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';

const EMAIL_PROTECTION = '1.3.6.1.5.5.7.3.4';
const DOCUMENT_SIGNING = '1.3.6.1.5.5.7.3.36';

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('generateDevPki', () => {
  it.each([
    ['ECDSA_P256_SHA256', false],
    ['ED25519', false],
    ['ECDSA_P256_SHA256', true],
    ['ED25519', true],
  ] as const)(
    '%s leaf (intermediate: %s) has the C2PA signer profile',
    async (leafAlgorithm, intermediate) => {
      const pki = await generateDevPki({ leafAlgorithm, intermediate });
      const chain = x509.PemConverter.decode(pki['tls.crt']).map((der) => new x509.X509Certificate(der));
      expect(chain).toHaveLength(intermediate ? 2 : 1);
      const leaf = chain[0] as x509.X509Certificate;
      const ca = new x509.X509Certificate(pki['ca.crt']);
      const issuer = intermediate ? (chain[1] as x509.X509Certificate) : ca;

      expect((leaf.publicKey.algorithm as { name: string }).name).toBe(
        leafAlgorithm === 'ED25519' ? 'Ed25519' : 'ECDSA',
      );
      expect(leaf.subject).not.toBe(leaf.issuer); // not self-signed
      expect(leaf.issuer).toBe(issuer.subject);
      expect(await leaf.verify({ publicKey: issuer.publicKey, signatureOnly: true })).toBe(true);
      expect(await ca.isSelfSigned()).toBe(true);

      const bc = leaf.getExtension(x509.BasicConstraintsExtension);
      expect(bc?.ca).toBe(false);
      const ku = leaf.getExtension(x509.KeyUsagesExtension);
      expect(ku?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
      expect(ku?.critical).toBe(true);
      const eku = leaf.getExtension(x509.ExtendedKeyUsageExtension);
      expect(eku?.usages).toEqual([EMAIL_PROTECTION, DOCUMENT_SIGNING]);
      const aki = leaf.getExtension(x509.AuthorityKeyIdentifierExtension);
      expect(aki?.keyId).toBe(issuer.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId);

      for (const cert of intermediate ? [ca, issuer] : [ca]) {
        expect(cert.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(true);
        const caUsages = cert.getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
        expect(caUsages & x509.KeyUsageFlags.keyCertSign).toBeTruthy();
      }
      expect(pki['tls.key']).toMatch(/^-----BEGIN PRIVATE KEY-----/); // PKCS#8
    },
  );

  it.runIf(hasOpenssl())('chains verify with OpenSSL (independent X.509 path validation)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'dev-pki-'));
    try {
      for (const leafAlgorithm of ['ECDSA_P256_SHA256', 'ED25519'] as const) {
        const pki = await generateDevPki({ leafAlgorithm, intermediate: true });
        await writeFile(join(dir, 'tls.crt'), pki['tls.crt']);
        await writeFile(join(dir, 'ca.crt'), pki['ca.crt']);
        const out = execFileSync(
          'openssl',
          [
            'verify',
            '-CAfile',
            join(dir, 'ca.crt'),
            '-untrusted',
            join(dir, 'tls.crt'),
            join(dir, 'tls.crt'),
          ],
          { encoding: 'utf8' },
        );
        expect(out.trim()).toMatch(/: OK$/);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

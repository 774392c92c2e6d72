/**
 * A CA and a server certificate for 127.0.0.1 / localhost, generated per test (never committed):
 * what the TLS tests give PostgreSQL and the S3 servers, and the CA the service is told to trust.
 */
import 'reflect-metadata';
import { KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

export interface ServerPki {
  /** PEM: the CA certificate (what DATABASE_CA_FILE / S3_CA_FILE name). */
  readonly ca: string;
  /** PEM: the server certificate (leaf only) and its PKCS#8 key. */
  readonly cert: string;
  readonly key: string;
}

const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

async function keys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
}

/** A fresh CA and a leaf for `hosts` (IP addresses and DNS names), valid for a day. */
export async function generateServerPki(
  hosts: readonly string[] = ['127.0.0.1', 'localhost'],
  caName = 'aibom-vault test TLS CA',
): Promise<ServerPki> {
  const now = Date.now();
  const notBefore = new Date(now - 60_000);
  const notAfter = new Date(now + 86_400_000);
  const caKeys = await keys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: `CN=${caName}`,
      keys: caKeys,
      signingAlgorithm: alg,
      notBefore,
      notAfter,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  const leafKeys = await keys();
  const leaf = await x509.X509CertificateGenerator.create(
    {
      subject: 'CN=127.0.0.1',
      issuer: ca.subject,
      publicKey: leafKeys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: alg,
      notBefore,
      notAfter,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement,
          true,
        ),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
        new x509.SubjectAlternativeNameExtension(
          hosts.map((h) =>
            /^[0-9.:]+$/.test(h) ? { type: 'ip' as const, value: h } : { type: 'dns' as const, value: h },
          ),
          false,
        ),
        await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  return {
    ca: ca.toString('pem') + '\n',
    cert: leaf.toString('pem') + '\n',
    key: KeyObject.from(leafKeys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}

import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { SigningError } from './errors.ts';

const CERT_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const ANY_BLOCK = /-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g;

/** The PEM blocks of a text, in order: its certificates only, or every block (keys too). */
export function pemBlocks(pem: string | Buffer, which: 'certificates' | 'any'): string[] {
  const text = typeof pem === 'string' ? pem : pem.toString('utf8');
  return text.match(which === 'certificates' ? CERT_BLOCK : ANY_BLOCK) ?? [];
}

/**
 * All certificates of a PEM bundle, in file order. `new X509Certificate(pem)` alone would read only
 * the first block and silently drop the intermediates of a `tls.crt`.
 */
export function parseCertificates(pem: string | Buffer, what: string): X509Certificate[] {
  const blocks = pemBlocks(pem, 'certificates');
  if (blocks.length === 0) {
    throw new SigningError('MALFORMED_CERTIFICATE', `${what}: no PEM certificate found`);
  }
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (cause) {
      throw new SigningError('MALFORMED_CERTIFICATE', `${what}: certificate #${i + 1} does not parse`, {
        cause,
      });
    }
  });
}

/** A PEM private key (PKCS#8, or SEC1 `EC PRIVATE KEY` as some issuers still write); never encrypted. */
export function parsePrivateKey(pem: string | Buffer, what: string): KeyObject {
  try {
    return createPrivateKey({ key: pem, format: 'pem' });
  } catch (cause) {
    throw new SigningError(
      'MALFORMED_KEY',
      `${what}: private key does not parse (encrypted keys are not supported)`,
      {
        cause,
      },
    );
  }
}

import { readFile } from 'node:fs/promises';
import { SigningError } from './errors.ts';
import { createKeySigner, type KeySigner } from './key-signer.ts';
import { parseCertificates, parsePrivateKey } from './pem.ts';

/** PEM material as cert-manager writes it into a `kubernetes.io/tls` Secret. */
export interface TlsMaterial {
  /** Leaf certificate followed by intermediates. */
  'tls.crt': string | Buffer;
  /** Private key of the leaf (PKCS#8 or SEC1). */
  'tls.key': string | Buffer;
  /** Issuing CA certificate(s); optional (ACME issuers leave it empty). */
  'ca.crt'?: string | Buffer;
}

export interface LoadOptions {
  /** Time the chain is checked at; defaults to now. */
  at?: Date;
}

/** Builds a signer from PEM material; throws `SigningError` on anything unusable. */
export function signerFromPem(material: TlsMaterial, options: LoadOptions = {}): KeySigner {
  const certificateChain = parseCertificates(material['tls.crt'], 'tls.crt');
  const privateKey = parsePrivateKey(material['tls.key'], 'tls.key');
  const ca = material['ca.crt'];
  const caCertificates = ca !== undefined && ca.length > 0 ? parseCertificates(ca, 'ca.crt') : [];
  return createKeySigner({
    privateKey,
    certificateChain,
    caCertificates,
    ...(options.at !== undefined ? { at: options.at } : {}),
  });
}

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}\s*$/;

/**
 * Builds a signer from the `data` object of a `kubernetes.io/tls` Secret (values base64, as the
 * API server returns them). Takes the data object, not a client, so it stays free of I/O; the
 * caller watches the Secret and calls this again on change.
 */
export function signerFromTlsSecretData(
  data: Readonly<Record<string, string | undefined>>,
  options: LoadOptions = {},
): KeySigner {
  const field = (key: 'tls.crt' | 'tls.key' | 'ca.crt', required: boolean): Buffer | undefined => {
    const value = data[key];
    if (value === undefined || value === '') {
      if (required) throw new SigningError('MISSING_MATERIAL', `Secret data has no "${key}"`);
      return undefined;
    }
    // Buffer.from(…, 'base64') skips garbage silently; a clear error beats a confusing PEM one.
    if (!BASE64.test(value)) throw new SigningError('MISSING_MATERIAL', `Secret data "${key}" is not base64`);
    return Buffer.from(value, 'base64');
  };
  const ca = field('ca.crt', false);
  return signerFromPem(
    {
      'tls.crt': field('tls.crt', true) as Buffer,
      'tls.key': field('tls.key', true) as Buffer,
      ...(ca !== undefined ? { 'ca.crt': ca } : {}),
    },
    options,
  );
}

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile?: string;
}

/** Builds a signer from files, e.g. a Secret mounted as a volume (`…/tls.crt`, `…/tls.key`, `…/ca.crt`). */
export async function loadSignerFromFiles(files: TlsFiles, options: LoadOptions = {}): Promise<KeySigner> {
  const read = async (path: string): Promise<Buffer> => {
    try {
      return await readFile(path);
    } catch (cause) {
      throw new SigningError('MISSING_MATERIAL', `cannot read ${path}`, { cause });
    }
  };
  const [cert, key, ca] = await Promise.all([
    read(files.certFile),
    read(files.keyFile),
    files.caFile !== undefined ? read(files.caFile) : undefined,
  ]);
  return signerFromPem(
    { 'tls.crt': cert, 'tls.key': key, ...(ca !== undefined ? { 'ca.crt': ca } : {}) },
    options,
  );
}

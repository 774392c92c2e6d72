import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { pemBlocks } from '../signing/index.ts';
import { CliError } from './command.ts';

/**
 * The CLI's one reader of the key, certificate and record files its flags name. A file that cannot
 * be read is a CliError naming the flag's meaning and the path (exit 2, a usage error, unless the
 * command says otherwise); a PEM block that does not parse is a CliError naming the file (exit 1).
 */
export async function readNamedFile(path: string, what: string, exitCode = 2): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new CliError(
      `cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      exitCode,
    );
  }
}

/** Every PEM block of `pem` as a public key (a certificate gives its key); none: an empty list. */
export function pemPublicKeys(pem: string | Buffer, path: string): KeyObject[] {
  return pemBlocks(pem, 'any').map((b) => {
    try {
      return b.includes('CERTIFICATE') ? new X509Certificate(b).publicKey : createPublicKey(b);
    } catch (err) {
      throw new CliError(`${path}: ${(err as Error).message}`);
    }
  });
}

/** Every certificate of `pem`, in order; none: an empty list. */
export function pemCertificates(pem: string | Buffer, path: string): X509Certificate[] {
  return pemBlocks(pem, 'certificates').map((b) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new CliError(`${path}: ${(err as Error).message}`);
    }
  });
}

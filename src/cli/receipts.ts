import { createPublicKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { decodeKeySet, logKeyOf, type LogKey } from '../cose/key.ts';
import { CliError } from './command.ts';

/**
 * Log keys for offline receipt checks: the COSE Key Set the log serves at /.well-known/scitt-keys
 * (saved to a file), or a PEM public key / certificate of the log.
 */
export async function loadLogKeys(path: string): Promise<LogKey[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch {
    throw new CliError(`cannot read log keys ${path}`);
  }
  const text = bytes.toString('utf8');
  if (text.includes('-----BEGIN')) {
    try {
      return [logKeyOf(createPublicKey(text))];
    } catch (err) {
      throw new CliError(`${path}: ${(err as Error).message}`);
    }
  }
  try {
    return decodeKeySet(bytes);
  } catch (err) {
    throw new CliError(`${path}: not a COSE Key Set or PEM key (${(err as Error).message})`);
  }
}

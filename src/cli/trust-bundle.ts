import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { trustBundleOf, TrustBundleError, type TrustBundle } from '../attest/trust-bundle.ts';
import { CliError } from './command.ts';

/** The name `service-ctl keys fetch --out DIR` gives the trust bundle inside DIR. */
export const TRUST_BUNDLE_FILE = 'trust-bundle.json';

/**
 * Reads the trust bundle of `service-ctl keys fetch`: `given` is its directory (the bundle is
 * `<dir>/trust-bundle.json`) or the file itself. A path that cannot be read is a usage error
 * (exit 2); a file that is no trust bundle fails (exit 1); either way one line naming the file.
 */
export async function loadTrustBundle(given: string): Promise<TrustBundle> {
  let path = given;
  let text: string;
  try {
    if ((await stat(given)).isDirectory()) path = join(given, TRUST_BUNDLE_FILE);
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(
      `cannot read trust bundle ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      2,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CliError(`${path}: not JSON (the trust-bundle.json of service-ctl keys fetch)`);
  }
  try {
    return trustBundleOf(json);
  } catch (err) {
    if (err instanceof TrustBundleError) throw new CliError(`${path}: ${err.message}`);
    throw err;
  }
}

import { readFile } from 'node:fs/promises';
import { trustBundleOf, TrustBundleError, type TrustBundle } from '../attest/trust-bundle.ts';
import { CliError } from './command.ts';

/** Reads `trust-bundle.json` (service-ctl keys fetch); a one-line CliError naming the file otherwise. */
export async function loadTrustBundle(path: string): Promise<TrustBundle> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(
      `cannot read trust bundle ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
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

import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateTsaPki, type DevTsaPkiOptions } from '../dev-pki.ts';
import { freePort, startProcess, waitReady, type Launch, type Proc } from './proc.ts';

export interface Tsa {
  readonly proc: Proc;
  /** RFC 3161 endpoint (POST application/timestamp-query): what TSA_URL is set to. */
  readonly url: string;
  /** PEM file of the TSA's root CA: what TSA_TRUST_ANCHORS is set to. */
  readonly trustAnchor: string;
}

/**
 * The Sigstore timestamp authority (RFC 3161) on a random loopback port, with a certificate chain
 * generated for this stack (root → leaf with the critical timeStamping EKU) and the upstream
 * `file` signer over the leaf's key. Nothing of it outlives the stack's temp dir.
 */
export async function startTsa(
  root: string,
  binary: string,
  launch: Launch = {},
  /** Options of the generated chain (tests give the leaf a short life). */
  pkiOptions: DevTsaPkiOptions = {},
): Promise<Tsa> {
  const dir = join(root, 'tsa');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const pki = await generateTsaPki(pkiOptions);
  const chain = join(dir, 'chain.pem');
  const key = join(dir, 'tsa.key');
  const trustAnchor = join(dir, 'ca.crt');
  await writeFile(chain, pki['chain.pem']);
  await writeFile(key, pki['tsa.key'], { mode: 0o600 });
  await writeFile(trustAnchor, pki['ca.crt']);
  const port = await freePort();
  const proc = await startProcess({
    name: 'tsa',
    command: binary,
    args: [
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--timestamp-signer',
      'file',
      '--file-signer-key-path',
      key,
      '--certificate-chain-path',
      chain,
    ],
    logFile: join(root, 'tsa.log'),
    env: { ...process.env, HOME: dir },
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(proc, async () => (await fetch(`${base}/ping`)).ok, 60_000, launch.signal);
  return { proc, url: `${base}/api/v1/timestamp`, trustAnchor };
}

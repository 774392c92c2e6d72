/**
 * `service-ctl verify --chain` against a vault that has signed no checkpoint yet (a fresh stack,
 * the demo's): one line saying so and how to get one, exit 1; not a bare "404". The API answers
 * through a fake fetch here (its 404 problem as the route writes it: src/http/routes/v1/chain.ts);
 * the checks against a real vault are in test/integration/api/chain*.test.ts.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyChainCli } from '../../../src/cli/chain.ts';
import { ApiClient } from '../../../src/cli/client.ts';
import { CliError } from '../../../src/cli/command.ts';

const dirs: string[] = [];
afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

const problem = (status: number, code: string, detail: string): Response =>
  new Response(JSON.stringify({ type: 'about:blank', title: 'x', status, code, detail }), {
    status,
    headers: { 'content-type': 'application/problem+json' },
  });

async function keyFile(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'chain-none-'));
  dirs.push(dir);
  const file = join(dir, 'signer.pem');
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await writeFile(file, publicKey.export({ type: 'spki', format: 'pem' }));
  return file;
}

describe('verify --chain before the first checkpoint', () => {
  it('says none is signed yet, when one will be, and that --fresh asks for one', async () => {
    const asked: string[] = [];
    const client = new ApiClient({
      baseUrl: 'http://vault.test',
      token: 't',
      fetch: ((url: string | URL) => {
        asked.push(String(url));
        return Promise.resolve(problem(404, 'NOT_FOUND', 'no checkpoint has been signed yet'));
      }) as typeof fetch,
    });
    const run = verifyChainCli({ key: [await keyFile()] }, client, () => []);
    await expect(run).rejects.toBeInstanceOf(CliError);
    await expect(run).rejects.toThrow(
      'HTTP 404 NOT_FOUND: no checkpoint has been signed yet; the controller signs one every VAULT_CHECKPOINT_INTERVAL_SECONDS, and --fresh asks for one now',
    );
    expect(asked).toEqual(['http://vault.test/v1/chain/checkpoint']);
  });

  it('any other failure is reported as it came (a 403 is not "none yet")', async () => {
    const client = new ApiClient({
      baseUrl: 'http://vault.test',
      token: 't',
      fetch: () => Promise.resolve(problem(403, 'FORBIDDEN', 'no get on attestations/chain')),
    });
    await expect(verifyChainCli({ key: [await keyFile()] }, client, () => [])).rejects.toThrow(
      /^HTTP 403 FORBIDDEN: no get on attestations\/chain$/,
    );
  });
});

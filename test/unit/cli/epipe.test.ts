import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EPIPE_EXIT } from '../../../src/cli/main.ts';

/**
 * `service-ctl … | head -1`: the reader of stdout goes away, the CLI's next write fails with EPIPE.
 * It must end quietly (no stack trace on stderr) with the SIGPIPE status, for every command: the
 * handler is installed by `main`. The child's stdout is closed before it starts, so its first write
 * already meets a pipe without a reader.
 */
const bin = fileURLToPath(new URL('../../../src/bin/service-ctl.ts', import.meta.url));
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'epipe-'));
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  await writeFile(join(dir, 'key.pem'), publicKey.export({ type: 'spki', format: 'pem' }));
  // Records that fail: one FAIL line each, so verify writes to stdout record by record.
  await writeFile(
    join(dir, 'records.json'),
    JSON.stringify(Array.from({ length: 50 }, (_, i) => ({ id: i }))),
  );
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function runWithClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('stdout closed by its reader (EPIPE)', () => {
  it('help: quiet exit with the SIGPIPE status', async () => {
    expect(await runWithClosedStdout(['--help'])).toEqual({ code: EPIPE_EXIT, stderr: '' });
  });

  it('verify: quiet exit with the SIGPIPE status', async () => {
    const r = await runWithClosedStdout(['verify', join(dir, 'records.json'), '--key', join(dir, 'key.pem')]);
    expect(r.stderr).not.toMatch(/EPIPE|Unhandled|at /);
    expect(r.code).toBe(EPIPE_EXIT);
  });
});

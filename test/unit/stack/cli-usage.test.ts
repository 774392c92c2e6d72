/**
 * `npm run stack -- …` with a wrong command line: exit 2 and the usage, before anything is read or
 * started; an argument a command does not take is refused, never silently dropped (`down --force`
 * used to stop the stack as a plain `down`). Only refused command lines run here: nothing touches a
 * stack or the machine's node.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const cliPath = resolve(import.meta.dirname, '../../../hack/stack/cli.ts');
const stateDir = mkdtempSync(join(tmpdir(), 'aibom-vault-stack-usage-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

function stack(...args: string[]): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], {
    env: { ...process.env, STACK_STATE_DIR: stateDir },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr };
}

describe('npm run stack with a wrong command line', () => {
  it.each([
    [['bogus'], 'got "bogus"'],
    [['down', '--force'], 'down takes no arguments (got "--force")'],
    [['status', '--json'], 'status takes no arguments (got "--json")'],
    [['failover', 'now'], 'failover takes no arguments (got "now")'],
    [['restart', 'sidecar'], 'restart takes one service: controller (got "sidecar")'],
    [['up', '--standby', 'weird'], '--standby takes sync or async, got "weird"'],
  ])('%j: exit 2, says why and shows the usage', (args, why) => {
    const { code, stderr } = stack(...args);
    expect(code).toBe(2);
    expect(stderr).toContain(why);
    expect(stderr).toContain('usage: npm run stack --');
    // Refused before anything was written.
    expect(readdirSync(stateDir)).toEqual([]);
  });
});

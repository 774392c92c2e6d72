/**
 * `service-ctl verify` says what is wrong with its input before anything else (a missing file, a
 * directory, an empty file), and a trust file that cannot be read is a usage error (exit 2, as
 * the help says); `keys fetch --out ""` is refused. One line on stderr each.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../helpers/pki.ts';
import { cliMain } from '../../helpers/cli-main.ts';

const exec = promisify(execFile);
let dir: string;
let ca: string;

const cli = cliMain;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'verify-input-'));
  ca = join(dir, 'ca.pem');
  await writeFile(ca, (await generateDevPki())['ca.crt']);
  await mkdir(join(dir, 'a-dir'));
  await writeFile(join(dir, 'empty.tar'), '');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('service-ctl verify input', () => {
  it('names a missing file, a directory or an empty file, whatever trust flags come with it', async () => {
    const missing = join(dir, 'nope.tar');
    const cases: [string, string][] = [
      [missing, `service-ctl: cannot read ${missing}: ENOENT\n`],
      [join(dir, 'a-dir'), `service-ctl: ${join(dir, 'a-dir')}: not an export bundle, envelope or AIBOM`],
      [
        join(dir, 'empty.tar'),
        `service-ctl: ${join(dir, 'empty.tar')}: not an export bundle, envelope or AIBOM`,
      ],
    ];
    for (const [path, message] of cases) {
      for (const flags of [['--trust-anchor', ca], ['--trust-bundle', join(dir, 'trust')], []]) {
        const r = await cli('verify', path, ...flags);
        expect(r.code, `${path} ${flags.join(' ')}`).toBe(2);
        expect(r.stderr.startsWith(message), r.stderr).toBe(true);
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
      }
    }
  });

  it('an unreadable --trust-anchor or --trust-bundle is a usage error (exit 2) naming it', async () => {
    const bundle = join(dir, 'bundle.tar');
    await writeFile(bundle, Buffer.concat([Buffer.alloc(257), Buffer.from('ustar\0'), Buffer.alloc(249)]));
    const anchor = await cli('verify', bundle, '--trust-anchor', join(dir, 'no-ca.pem'));
    expect(anchor).toMatchObject({
      code: 2,
      stderr: `service-ctl: cannot read trust anchor ${join(dir, 'no-ca.pem')}: ENOENT\n`,
    });
    const trust = await cli('verify', bundle, '--trust-bundle', join(dir, 'no-trust'));
    expect(trust).toMatchObject({
      code: 2,
      stderr: `service-ctl: cannot read trust bundle ${join(dir, 'no-trust')}: ENOENT\n`,
    });
    // A directory without the trust bundle in it: the file it looked for is named.
    const emptyDir = await cli('verify', bundle, '--trust-bundle', join(dir, 'a-dir'));
    expect(emptyDir).toMatchObject({
      code: 2,
      stderr: `service-ctl: cannot read trust bundle ${join(dir, 'a-dir', 'trust-bundle.json')}: ENOENT\n`,
    });
  });
});

describe('service-ctl keys fetch', () => {
  it('refuses an empty --out before asking the API anything', async () => {
    const r = await cli('keys', 'fetch', '--out', '', '--api-url', 'http://127.0.0.1:1', '--token', 't');
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe('service-ctl: --out needs a directory name (default: trust)\n');
  });
});

describe('the CLI entry point', () => {
  /** A child node process that loads the Biscuit wasm module, with or without main's filter. */
  async function stderrOf(filtered: boolean): Promise<string> {
    const script = [
      filtered ? "(await import('./src/capability/wasm-warning.ts')).quietWasmImportWarning();" : '',
      "await (await import('./src/capability/biscuit.ts')).loadBiscuit();",
      "process.emitWarning('another warning', 'DeprecationWarning');",
    ].join('\n');
    const r = await exec(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() });
    return r.stderr;
  }

  it('silences exactly the ExperimentalWarning of importing the wasm module, not other warnings', async () => {
    // The warning is real (without the filter it is printed), and the filter drops only it.
    expect(await stderrOf(false)).toContain('ExperimentalWarning: Importing WebAssembly module instances');
    const filtered = await stderrOf(true);
    expect(filtered).not.toContain('WebAssembly');
    expect(filtered).toContain('DeprecationWarning: another warning');
  });
});

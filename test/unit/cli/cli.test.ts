/**
 * service-ctl's shared machinery, without a server: `--help` on every command (from the flags it
 * declares), run references, output formats (YAML checked by an independent parser, js-yaml, the
 * one @kubernetes/client-node uses). The commands against the real API are in
 * test/integration/cli.test.ts.
 */
import { load as loadYaml } from 'js-yaml';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { commands } from '../../../src/cli/main.ts';
import { parseRunRef } from '../../../src/cli/options.ts';
import { render, renderTable } from '../../../src/cli/output.ts';
import { shortPredicate } from '../../../src/cli/query.ts';
import { cliMain } from '../../helpers/cli-main.ts';

const cli = cliMain;

afterEach(() => vi.restoreAllMocks());

describe('--help', () => {
  it.each(commands.map((c) => [c.path.join(' ')]))(
    'service-ctl %s --help: usage and every flag',
    async (path) => {
      const command = commands.find((c) => c.path.join(' ') === path)!;
      for (const flag of ['--help', '-h']) {
        const { code, stdout, stderr } = await cli(...command.path, flag);
        expect(code).toBe(0);
        expect(stderr).toBe('');
        expect(stdout.split('\n')[0]).toMatch(new RegExp(`^usage: service-ctl ${path}\\b`));
        expect(stdout).toContain(command.summary);
        for (const name of Object.keys(command.options ?? {})) expect(stdout).toContain(`--${name}`);
        expect(stdout).toContain('-h, --help');
      }
    },
  );

  it('works on an otherwise wrong command line, and `service-ctl help <command>` shows the same', async () => {
    const direct = await cli('get', '--no-such-flag', '--help');
    expect(direct.code).toBe(0);
    expect((await cli('help', 'get')).stdout).toBe(direct.stdout);
    expect((await cli('help')).stdout).toMatch(/^usage: service-ctl <command>/);
  });

  it('an unknown flag is one line on stderr naming the help, exit 2', async () => {
    const { code, stdout, stderr } = await cli('query', '--bogus');
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/'--bogus'.*service-ctl query --help/);
  });
});

describe('a bad environment', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('is one line naming every bad variable, the secret without its value, exit 2', async () => {
    vi.stubEnv('SERVICE_API_URL', 'not-a-url');
    vi.stubEnv('SERVICE_TOKEN', '');
    const { code, stdout, stderr } = await cli('get', '--run', 'ns/name');
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      'service-ctl: invalid configuration: SERVICE_API_URL: must be an absolute URL; SERVICE_TOKEN: must not be empty\n',
    );
  });
});

describe('a flag value starting with a dash', () => {
  it('says how to write it, in one line, exit 2', async () => {
    const { code, stderr } = await cli('query', '--limit', '-5');
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain("use '--limit=-XYZ'");
    // Written that way, the value reaches the command's own check.
    expect((await cli('query', '--limit=-5')).stderr).toContain('--limit is 1–1000');
  });
});

describe('run references', () => {
  it('take a UUID or NAMESPACE/NAME', () => {
    expect(parseRunRef('0F8E5C1A-2B3C-4D5E-8F90-A1B2C3D4E5F6')).toEqual({
      id: '0f8e5c1a-2b3c-4d5e-8f90-a1b2c3d4e5f6',
    });
    expect(parseRunRef('demo/sample-run')).toEqual({ namespace: 'demo', name: 'sample-run' });
    expect(parseRunRef('team-a/run.v2')).toEqual({ namespace: 'team-a', name: 'run.v2' });
  });

  it.each([
    ['nothing', undefined],
    ['a name without namespace', 'sample-run'],
    ['upper case', 'Demo/run'],
    ['three parts', 'a/b/c'],
    ['an empty part', 'demo/'],
    ['a namespace with a dot', 'de.mo/run'],
    ['not quite a UUID', '0f8e5c1a-2b3c-4d5e-8f90-a1b2c3d4e5f'],
  ])('refuse %s (exit 2)', (_what, text) => {
    expect(() => parseRunRef(text)).toThrow(expect.objectContaining({ exitCode: 2 }) as Error);
  });

  it('a bad --run is a usage error before anything is asked of the API', async () => {
    const { code, stderr } = await cli('get', '--run', 'sample-run', '--api-url', 'http://127.0.0.1:9');
    expect(code).toBe(2);
    expect(stderr).toMatch(/neither a run UUID nor NAMESPACE\/NAME/);
  });
});

describe('output', () => {
  const json = fc.jsonValue() as fc.Arbitrary<unknown>;

  it('-o yaml is the same data for an independent YAML parser (js-yaml), for any JSON value', () => {
    fc.assert(
      fc.property(json, (v) => {
        // JSON has no -0; YAML would keep it.
        const value: unknown = JSON.parse(JSON.stringify(v) ?? 'null');
        expect(loadYaml(render(value, 'yaml'))).toEqual(value);
      }),
      { numRuns: 300 },
    );
  });

  it('-o yaml quotes strings a YAML 1.1 reader would take for booleans, numbers or null', () => {
    const tricky = [
      'yes',
      'no',
      'on',
      'off',
      'y',
      'N',
      '~',
      'null',
      '017',
      '0o17',
      '1_000',
      '0x1F',
      '.inf',
      '12:30:00',
    ];
    const text = render({ values: tricky }, 'yaml');
    for (const t of tricky) expect(text).toContain(`- "${t}"\n`);
  });

  it('-o json and ndjson parse back to the data', () => {
    const data = [{ a: 1, b: ['x', null] }, { c: 'd\n"e"' }];
    expect(JSON.parse(render(data, 'json'))).toEqual(data);
    expect(
      render(data, 'ndjson')
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual(data);
  });

  it('tables: upper-case headers, aligned columns, <none> for empty cells, one line per row', () => {
    const text = renderTable(
      [
        { n: 'a', v: 1 },
        { n: 'long-name', v: undefined },
        { n: 'x\ny', v: 3 },
      ],
      [
        { header: 'name', value: (r) => r.n },
        { header: 'value', value: (r) => r.v },
      ],
    );
    expect(text.split('\n')).toEqual([
      'NAME        VALUE',
      'a           1',
      'long-name   <none>',
      'x y         3',
      '',
    ]);
  });

  it('predicate types are shortened for the table', () => {
    expect(shortPredicate('https://vault.service.dev/attestations/step/v1')).toBe('step/v1');
    expect(shortPredicate('https://slsa.dev/provenance/v1')).toBe('slsa.dev/provenance/v1');
  });
});

/**
 * The CLI's one PEM reader (src/cli/pem.ts) and its one set of selection flags (src/cli/filter.ts),
 * each tried with what a user gets wrong: an unreadable file, a file with no PEM in it, a block that
 * does not parse, a bad --kind or --from. Every failure is a CliError with the exit code the help
 * promises and a message naming the file or flag; nothing is silently dropped.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../../../src/cli/client.ts';
import { CliError } from '../../../src/cli/command.ts';
import { filterOf } from '../../../src/cli/filter.ts';
import { pemCertificates, pemPublicKeys, readNamedFile } from '../../../src/cli/pem.ts';
import { generateDevPki } from '../../helpers/pki.ts';

let dir: string;
let pki: Awaited<ReturnType<typeof generateDevPki>>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cli-pem-'));
  pki = await generateDevPki();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const noClient = (): ApiClient => {
  throw new Error('no API call is expected');
};

describe('cli pem reader', () => {
  it('a file that cannot be read is a CliError naming it, exit 2 unless the command says 1', async () => {
    const missing = join(dir, 'missing.pem');
    const usage = await readNamedFile(missing, 'trust anchor').catch((e: unknown) => e);
    expect(usage).toBeInstanceOf(CliError);
    expect(usage).toMatchObject({
      exitCode: 2,
      code: 'USAGE',
      message: `cannot read trust anchor ${missing}: ENOENT`,
    });
    const failed = await readNamedFile(missing, 'key', 1).catch((e: unknown) => e);
    expect(failed).toMatchObject({ exitCode: 1, message: `cannot read key ${missing}: ENOENT` });
    await writeFile(join(dir, 'x.pem'), 'bytes');
    expect((await readNamedFile(join(dir, 'x.pem'), 'key')).toString()).toBe('bytes');
  });

  it('reads every block in order: a certificate bundle, a bare key, a key beside certificates', () => {
    const chain = pki['tls.crt'] + pki['ca.crt'];
    const certs = pemCertificates(chain, 'chain.pem');
    expect(certs.map((c) => c.subject)).toHaveLength(2);
    expect(certs[1]!.subject).toContain('aibom-vault dev CA');
    const spki = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const keys = pemPublicKeys(`${spki}\nsome text between blocks\n${pki['tls.crt']}`, 'keys.pem');
    expect(keys.map((k) => k.asymmetricKeyType)).toEqual(['ed25519', 'ec']);
    // Certificates only: the key block beside them is not taken for one.
    expect(pemCertificates(`${spki}${pki['ca.crt']}`, 'mixed.pem')).toHaveLength(1);
  });

  it('no PEM at all is an empty list (the caller names what was missing), a broken block an error naming the file', () => {
    expect(pemCertificates('not a pem', 'a.pem')).toEqual([]);
    expect(pemPublicKeys(Buffer.from(''), 'a.pem')).toEqual([]);
    const broken = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
    expect(() => pemCertificates(broken, 'bad.pem')).toThrow(CliError);
    expect(() => pemCertificates(broken, 'bad.pem')).toThrow(/^bad\.pem: /);
    expect(() =>
      pemPublicKeys('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----', 'k.pem'),
    ).toThrow(/^k\.pem: /);
  });
});

describe('cli selection flags', () => {
  it('make the API filter body, namespaces deduplicated, a policy pack split at @', async () => {
    const body = await filterOf(
      {
        step: 'train',
        subject: 's',
        'artifact-digest': `sha256:${'a'.repeat(64)}`,
        'policy-pack': 'eu-ai-act@1.2',
        'capability-token': 'tok',
        kind: 'step',
        from: '2025-01-01T00:00:00Z',
        to: '2025-02-01T00:00:00Z',
        namespace: ['b', 'a', 'b'],
      },
      noClient,
    );
    expect(body).toEqual({
      step_id: 'train',
      subject: 's',
      artifact_digest: `sha256:${'a'.repeat(64)}`,
      policy_pack: { name: 'eu-ai-act', version: '1.2' },
      capability_token: 'tok',
      kind: 'step',
      from: '2025-01-01T00:00:00Z',
      to: '2025-02-01T00:00:00Z',
      namespaces: ['b', 'a'],
    });
    expect(await filterOf({}, noClient)).toEqual({});
  });

  it.each([
    [{ kind: 'steps' }, /^--kind is one of run, step/],
    [{ from: 'yesterday' }, /^--from: yesterday is not an RFC 3339 time$/],
    [{ to: '2025-01-01' }, /^--to: 2025-01-01 is not an RFC 3339 time$/],
    [{ 'policy-pack': '@1' }, /^--policy-pack: /],
  ])('refuse %o as a usage error (exit 2) before any API call', async (values, message) => {
    const err = await filterOf(values, noClient).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({ exitCode: 2 });
    expect((err as Error).message).toMatch(message);
  });
});

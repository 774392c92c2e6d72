import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Paths } from '../../../src/export/layout.ts';
import { cliMain } from '../../helpers/cli-main.ts';
import { tarEntries } from '../../helpers/export.ts';
import { fixture, type Fixture } from '../verify/fixtures.ts';

/**
 * Issue 22 item 16: `service-ctl verify bundle.tar` printed "verified" CHAIN lines for a bundle that
 * failed (only its last line said NOT verified), so a script collecting CHAIN lines accepted
 * approvals from a tampered archive. CHAIN lines now come only from a bundle that verified.
 */
let dir: string;
let f: Fixture;
let ca: string;
let good: string;
let tampered: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'verify-chains-'));
  f = await fixture();
  ca = join(dir, 'ca.pem');
  await writeFile(ca, f.signer.caCertificates.map((c) => c.toString()).join(''));
  good = join(dir, 'good.tar');
  await writeFile(good, f.bytes);
  // One byte of index.json changed: every record, chain and token is intact, the archive is not.
  const index = (await tarEntries(f.bytes)).find((e) => e.path === Paths.index)!;
  const bad = Buffer.from(f.bytes);
  const at = index.offset + 512 + 20;
  bad[at] = bad[at]! ^ 0x01;
  tampered = join(dir, 'tampered.tar');
  await writeFile(tampered, bad);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const chainLines = (out: string) => out.split('\n').filter((l) => l.startsWith('CHAIN'));

describe('verify bundle.tar: CHAIN lines only for a bundle that verified', () => {
  it('a bundle that verifies lists its chains', async () => {
    const r = await cliMain('verify', good, '--trust-anchor', ca);
    expect(r.stdout).toContain('bundle verified');
    expect(r.code).toBe(0);
    expect(chainLines(r.stdout).length).toBeGreaterThan(0);
  });

  it('a tampered bundle: NOT verified, no CHAIN line, the withheld chains counted', async () => {
    const r = await cliMain('verify', tampered, '--trust-anchor', ca);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAIL {2}index\.json {2}/);
    expect(chainLines(r.stdout)).toEqual([]);
    expect(r.stdout).toMatch(
      /bundle NOT verified: \d+ problem\(s\) \(.*\); \d+ capability chain\(s\) not listed: they vouch for nothing in a bundle that fails\n$/,
    );
    const json = await cliMain('verify', tampered, '--trust-anchor', ca, '--json');
    expect(json.code).toBe(1);
    expect(json.stdout).not.toContain('"chain"');
  });
});

describe('verify record.json --json: chains only for a record that verified', () => {
  it('a capability record whose receipt is missing (--log-keys): ok false, no chains', async () => {
    const capability = [...f.views.values()].find((v) => v.kind === 'capability')!;
    const record = join(dir, 'capability.json');
    await writeFile(record, JSON.stringify(capability));
    const key = join(dir, 'signer.pem');
    await writeFile(key, f.signer.publicKey.export({ type: 'spki', format: 'pem' }));
    const logKey = join(dir, 'log.pem');
    await writeFile(logKey, f.signer.publicKey.export({ type: 'spki', format: 'pem' }));
    const ok = await cliMain('verify', record, '--key', key, '--json');
    expect(JSON.parse(ok.stdout.trim())).toMatchObject({ ok: true, chains: [expect.any(String)] });
    const r = await cliMain('verify', record, '--key', key, '--log-keys', logKey, '--json');
    expect(r.code).toBe(1);
    const line = JSON.parse(r.stdout.trim()) as {
      ok: boolean;
      chains: string[];
      problems: { code: string }[];
    };
    expect(line.ok).toBe(false);
    expect(line.problems.map((p) => p.code)).toContain('RECEIPT_MISSING');
    expect(line.chains).toEqual([]);
  });
});

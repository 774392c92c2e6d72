import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner } from '../../../src/tlog/note.ts';

const env = {
  DATABASE_URL: 'postgres://x@y/z',
  S3_ENDPOINT: 'http://s3',
  S3_ACCESS_KEY: 'a',
  S3_SECRET_KEY: 'b',
};
const problems = (extra: Record<string, string>): string => {
  try {
    loadConfig('controller', { ...env, ...extra });
    return '';
  } catch (err) {
    return (err as Error).message;
  }
};

describe('TLOG_* settings', () => {
  const w1 = cosigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey).vkey;
  const w2 = cosigner('w2.example', generateKeyPairSync('ed25519').privateKey).vkey;

  it('parses witnesses as real cosignature/v1 vkeys are written (44 base64 characters, no padding)', () => {
    const c = loadConfig('controller', {
      ...env,
      TLOG_WITNESSES: `https://witness.example/ ${w1},\n  http://127.0.0.1:7380 ${w2}`,
      TLOG_ORIGIN: 'vault.example.com/team-a',
    });
    expect(c.TLOG_WITNESSES).toEqual([
      { url: 'https://witness.example', vkey: w1 },
      { url: 'http://127.0.0.1:7380', vkey: w2 },
    ]);
    expect(c.TLOG_ORIGIN).toBe('vault.example.com/team-a');
    expect(loadConfig('controller', env).TLOG_WITNESSES).toEqual([]);
  });

  it('refuses a log (Ed25519) key as a witness key, a missing URL, a scheme in the origin', () => {
    const logKey = ed25519NoteSigner('vault.example', generateKeyPairSync('ed25519').privateKey).vkey;
    expect(problems({ TLOG_WITNESSES: `https://w.example ${logKey}` })).toMatch(
      /TLOG_WITNESSES: .*signature type 0x04/,
    );
    expect(problems({ TLOG_WITNESSES: w1 })).toMatch(/TLOG_WITNESSES: each witness is "<url> <vkey>"/);
    expect(problems({ TLOG_WITNESSES: `ftp://w.example ${w1}` })).toMatch(/not http\(s\)/);
    expect(problems({ TLOG_ORIGIN: 'https://vault.example.com' })).toMatch(
      /TLOG_ORIGIN: must be a schema-less URL/,
    );
    expect(problems({ TLOG_ORIGIN: 'vault example' })).toMatch(/TLOG_ORIGIN/);
  });
});

import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.ts';
import { cosigner } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner } from '../../../src/tlog/note.ts';
import { configProblems, controllerEnv } from './load.ts';

describe('TLOG_* settings', () => {
  const w1 = cosigner('witness.example/w1', generateKeyPairSync('ed25519').privateKey).vkey;
  const w2 = cosigner('w2.example', generateKeyPairSync('ed25519').privateKey).vkey;

  it('parses witnesses as real cosignature/v1 vkeys are written (44 base64 characters, no padding)', () => {
    const c = loadConfig('controller', {
      ...controllerEnv,
      TLOG_WITNESSES: `https://witness.example/ ${w1},\n  http://127.0.0.1:7380 ${w2}`,
      TLOG_ORIGIN: 'vault.example.com/team-a',
    });
    expect(c.TLOG_WITNESSES).toEqual([
      { url: 'https://witness.example', vkey: w1 },
      { url: 'http://127.0.0.1:7380', vkey: w2 },
    ]);
    expect(c.TLOG_ORIGIN).toBe('vault.example.com/team-a');
    expect(loadConfig('controller', controllerEnv).TLOG_WITNESSES).toEqual([]);
  });

  it('refuses a log (Ed25519) key as a witness key, a missing URL, a scheme in the origin', () => {
    const logKey = ed25519NoteSigner('vault.example', generateKeyPairSync('ed25519').privateKey).vkey;
    expect(configProblems({ TLOG_WITNESSES: `https://w.example ${logKey}` })).toMatch(
      /TLOG_WITNESSES: .*signature type 0x04/,
    );
    expect(configProblems({ TLOG_WITNESSES: w1 })).toMatch(/TLOG_WITNESSES: each witness is "<url> <vkey>"/);
    expect(configProblems({ TLOG_WITNESSES: `ftp://w.example ${w1}` })).toMatch(/not http\(s\)/);
    expect(configProblems({ TLOG_ORIGIN: 'https://vault.example.com' })).toMatch(
      /TLOG_ORIGIN: must be a schema-less URL/,
    );
    expect(configProblems({ TLOG_ORIGIN: 'vault example' })).toMatch(/TLOG_ORIGIN/);
  });
});

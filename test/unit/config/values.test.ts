/**
 * Bad values of the settings this round added (retention, Attestation resources): each is refused
 * with one line naming the variable, what it takes and what it got; nothing is guessed.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.ts';

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

describe('retention and resource settings', () => {
  it('refuses a negative, fractional or huge month count, naming the range', () => {
    expect(problems({ VAULT_RETENTION_MONTHS: '-1' })).toContain(
      'VAULT_RETENTION_MONTHS: must be a whole number from 0 to 1200, got "-1"',
    );
    expect(problems({ VAULT_RETENTION_MONTHS: '1.5' })).toContain('got "1.5"');
    expect(problems({ VAULT_RETENTION_MONTHS: '99999999999' })).toContain(
      'VAULT_RETENTION_MONTHS: must be between 0 and 1200, got 99999999999',
    );
    expect(loadConfig('controller', { ...env, VAULT_RETENTION_MONTHS: '3' }).VAULT_RETENTION_MONTHS).toBe(3);
  });

  it('refuses a mode in the wrong case, a negative or zero retention, a word for a flag', () => {
    expect(problems({ ATTESTATION_RESOURCES: 'perrun' })).toContain(
      'ATTESTATION_RESOURCES: must be one of perRecord, perRun, none, got "perrun"',
    );
    for (const bad of ['-5d', '0s', '1e3d', '30D', '99999999999999d'])
      expect(problems({ ATTESTATION_RESOURCE_RETENTION: bad }), bad).toContain(
        `ATTESTATION_RESOURCE_RETENTION: must be a duration like 90s, 30m, 12h or 30d, got "${bad}"`,
      );
    expect(problems({ VAULT_RETENTION_DROP: 'yes' })).toContain(
      'VAULT_RETENTION_DROP: must be 1 or 0, got "yes"',
    );
  });
});

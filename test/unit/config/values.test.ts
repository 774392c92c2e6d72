/**
 * Bad values of the vault's retention settings: each is refused with one line naming the variable,
 * what it takes and what it got; nothing is guessed. (The Attestation resource settings:
 * test/unit/controller/resources.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.ts';
import { configProblems, controllerEnv } from './load.ts';

describe('vault retention settings', () => {
  it('refuse a negative, fractional or huge month count, naming the range', () => {
    expect(configProblems({ VAULT_RETENTION_MONTHS: '-1' })).toContain(
      'VAULT_RETENTION_MONTHS: must be a whole number from 0 to 1200, got "-1"',
    );
    expect(configProblems({ VAULT_RETENTION_MONTHS: '1.5' })).toContain('got "1.5"');
    expect(configProblems({ VAULT_RETENTION_MONTHS: '99999999999' })).toContain(
      'VAULT_RETENTION_MONTHS: must be between 0 and 1200, got 99999999999',
    );
    expect(configProblems({ VAULT_RETENTION_DROP: 'yes' })).toContain(
      'VAULT_RETENTION_DROP: must be 1 or 0, got "yes"',
    );
    const c = loadConfig('controller', { ...controllerEnv, VAULT_RETENTION_MONTHS: '3' });
    expect(c.VAULT_RETENTION_MONTHS).toBe(3);
  });
});

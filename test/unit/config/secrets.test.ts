/**
 * Secret settings (database URLs, S3 secret key, tokens): a bad value is refused naming the
 * variable and why, and the message never shows the value (it ends up in pod logs and CI output).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { schema } from '../../../src/config/index.ts';
import { configProblems } from './load.ts';

const secretKeys = Object.entries(schema)
  .filter(([, s]) => (s as { secret?: boolean }).secret === true)
  .map(([k]) => k);

describe('secret settings', () => {
  it('are the ones that carry credentials', () => {
    expect(secretKeys).toEqual(
      expect.arrayContaining(['DATABASE_URL', 'S3_SECRET_KEY', 'SCITT_TOKEN', 'SERVICE_TOKEN']),
    );
  });

  it('an empty or blank value reads "must not be empty", with nothing spliced into it', () => {
    // The value used to be "redacted" by replacing it inside the message: an empty value gave
    // "S3_SECRET_KEY: <redacted>must not be empty", a single space "must<redacted>not be empty".
    for (const value of ['', ' ', '   ']) {
      expect(configProblems({ S3_SECRET_KEY: value })).toBe(
        'invalid configuration:\n  S3_SECRET_KEY: must not be empty',
      );
    }
  });

  it('a bad value is named by its variable and never shown', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...secretKeys),
        fc.string({ unit: fc.constantFrom(...'0123456789abcdef:@/ '), minLength: 12, maxLength: 40 }),
        (key, junk) => {
          const value = `zz${junk}zz`; // never an absolute URL, never blank
          const message = configProblems({ [key]: value });
          if (message === '') return; // some secrets take any non-empty string
          expect(message).toContain(`${key}: `);
          expect(message).not.toContain(value);
        },
      ),
    );
    expect(configProblems({ DATABASE_URL: 'zz-hunter2-zz' })).toBe(
      'invalid configuration:\n  DATABASE_URL: must be an absolute URL',
    );
  });
});

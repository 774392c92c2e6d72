import { describe, expect, it } from 'vitest';
import { BaseError, hasCode } from '../../../src/errors.ts';

type DemoCode = 'ONE' | 'TWO';
class DemoError extends BaseError<DemoCode> {}

describe('BaseError', () => {
  it('carries code, message, cause and the subclass name', () => {
    const cause = new Error('low level');
    const err = new DemoError('TWO', 'it broke', { cause });
    expect(err).toBeInstanceOf(Error);
    expect(err).toBeInstanceOf(BaseError);
    expect(err.name).toBe('DemoError');
    expect(err.code).toBe('TWO');
    expect(err.message).toBe('it broke');
    expect(err.cause).toBe(cause);
    expect(String(err.stack)).toContain('DemoError: it broke');
  });

  it('hasCode matches only BaseErrors with that code', () => {
    expect(hasCode(new DemoError('ONE', 'x'), 'ONE')).toBe(true);
    expect(hasCode(new DemoError('ONE', 'x'), 'TWO')).toBe(false);
    expect(hasCode(Object.assign(new Error('x'), { code: 'ONE' }), 'ONE')).toBe(false);
    expect(hasCode('ONE', 'ONE')).toBe(false);
  });
});

describe('every typed error of the formats, signing, HTTP, CLI, config and kube layers', () => {
  it('is a BaseError with its code, cause and class name', async () => {
    const { AttestError, VerificationError } = await import('../../../src/attest/errors.ts');
    const { SigningError } = await import('../../../src/signing/errors.ts');
    const { C2paError } = await import('../../../src/c2pa/errors.ts');
    const { CoseError } = await import('../../../src/cose/errors.ts');
    const { TransparencyError } = await import('../../../src/transparency/errors.ts');
    const { AibomError } = await import('../../../src/aibom/errors.ts');
    const { ConfigError } = await import('../../../src/config/index.ts');
    const { ProblemError } = await import('../../../src/http/problem.ts');
    const { CliError } = await import('../../../src/cli/command.ts');
    const { ApiError } = await import('../../../src/cli/client.ts');
    const { KubeApiError } = await import('../../../src/kube/client.ts');
    const { TimestampError } = await import('../../../src/timestamp/errors.ts');
    const cause = new Error('underneath');
    const cases: [BaseError<string | number>, string, string | number][] = [
      [new AttestError('PREDICATE_INVALID', 'm', { cause }), 'AttestError', 'PREDICATE_INVALID'],
      [
        new VerificationError([{ code: 'DIGEST_MISMATCH', message: 'm' }], { cause }),
        'VerificationError',
        'DIGEST_MISMATCH',
      ],
      [new SigningError('MALFORMED_KEY', 'm', { cause }), 'SigningError', 'MALFORMED_KEY'],
      [new C2paError('MALFORMED_MANIFEST', 'm', { cause }), 'C2paError', 'MALFORMED_MANIFEST'],
      [new CoseError('MALFORMED', 'm', { cause }), 'CoseError', 'MALFORMED'],
      [new TransparencyError('BAD_RESPONSE', 'm', { cause }), 'TransparencyError', 'BAD_RESPONSE'],
      [new AibomError('INVALID_RUN', 'm', { cause }), 'AibomError', 'INVALID_RUN'],
      [new ConfigError(['X: bad']), 'ConfigError', 'INVALID_CONFIG'],
      [new ProblemError(404, 'NOT_FOUND', 'm', { cause }), 'ProblemError', 'NOT_FOUND'],
      [new CliError('m', 2, { cause }), 'CliError', 'USAGE'],
      [new CliError('m'), 'CliError', 'FAILED'],
      [new ApiError(403, 'FORBIDDEN', 'm'), 'ApiError', 'API'],
      [new KubeApiError(409, { reason: 'Conflict', code: 409 }), 'KubeApiError', 409],
      [new TimestampError('IMPRINT_MISMATCH', 'm', { cause }), 'TimestampError', 'IMPRINT_MISMATCH'],
    ];
    for (const [err, name, code] of cases) {
      expect(err, name).toBeInstanceOf(BaseError);
      expect(err.name).toBe(name);
      expect(hasCode(err, code)).toBe(true);
      expect(String(err.stack)).toContain(`${name}: `);
      const takesCause = !['ConfigError', 'KubeApiError', 'ApiError'].includes(name) && code !== 'FAILED';
      if (takesCause) expect(err.cause).toBe(cause);
    }
  });
});

describe('the errors issue 23 gave a code', () => {
  it('InvariantError, ConfigValueError, WatchInterruptedError are BaseErrors with their codes', async () => {
    const { InvariantError } = await import('../../../src/errors.ts');
    const { ConfigValueError } = await import('../../../src/config/errors.ts');
    const { WatchInterruptedError } = await import('../../../src/kube/client.ts');
    const cases: [BaseError<string>, string, string][] = [
      [new InvariantError('m'), 'InvariantError', 'INVARIANT'],
      [new ConfigValueError('m'), 'ConfigValueError', 'INVALID_VALUE'],
      [new WatchInterruptedError('WATCH_INTERRUPTED', 'm'), 'WatchInterruptedError', 'WATCH_INTERRUPTED'],
    ];
    for (const [err, name, code] of cases) {
      expect(err, name).toBeInstanceOf(BaseError);
      expect(err.name).toBe(name);
      expect(hasCode(err, code)).toBe(true);
    }
  });

  it('a bad configuration value still reaches the operator as one line naming the key', async () => {
    const { loadConfig, ConfigError } = await import('../../../src/config/index.ts');
    const err = (() => {
      try {
        loadConfig('cli', { LOG_LEVEL: 'loud' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as InstanceType<typeof ConfigError>).problems.join('\n')).toMatch(
      /^LOG_LEVEL: must be one of /m,
    );
  });

  it('the JUMBF writer refuses bad box input with C2paError INVALID_INPUT', async () => {
    const { C2paError } = await import('../../../src/c2pa/errors.ts');
    const { c2paUuid, encodeBox, encodeDescription } = await import('../../../src/c2pa/jumbf.ts');
    const bad: [() => unknown, RegExp][] = [
      [() => c2paUuid('toolong'), /four-character code expected/],
      [() => encodeBox('abc', Buffer.alloc(1)), /box type must be four characters/],
      [() => encodeDescription(Buffer.alloc(3), 'x'), /16-byte UUID/],
      [() => encodeDescription(Buffer.alloc(16), 'a\0b'), /must not contain NUL/],
    ];
    for (const [call, message] of bad) {
      expect(call).toThrow(C2paError);
      expect(call).toThrow(message);
      try {
        call();
      } catch (e) {
        expect(hasCode(e, 'INVALID_INPUT')).toBe(true);
      }
    }
    expect(encodeBox('abcd', Buffer.alloc(1))).toHaveLength(9);
  });
});

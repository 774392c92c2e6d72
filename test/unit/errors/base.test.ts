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

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CursorCodec, fingerprint } from '../../../src/vault/cursor.ts';
import { VaultError } from '../../../src/vault/errors.ts';

const ID = '01940f2c-5a2e-7c3d-8e4f-0123456789ab';

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof VaultError ? err.code : 'other';
  }
  return undefined;
}

describe('CursorCodec', () => {
  const key = randomBytes(32);
  const codec = new CursorCodec(key);
  const fp = fingerprint(['a', null]);

  it('round-trips and is opaque base64url', () => {
    const c = codec.encode(ID, fp);
    expect(c).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(codec.decode(c, fp)).toBe(ID);
    expect(new CursorCodec(Buffer.from(key)).decode(c, fp)).toBe(ID);
  });

  it('rejects tampering, other keys, other filters and junk with CURSOR_INVALID', () => {
    const c = codec.encode(ID, fp);
    const [body, mac] = c.split('.') as [string, string];
    const other = fingerprint(['b', null]);
    const reencoded = Buffer.from(JSON.stringify({ v: 1, after: ID.replace('a', 'b'), f: fp })).toString(
      'base64url',
    );
    const v2 = new CursorCodec(key);
    const cases = [
      `${reencoded}.${mac}`,
      `${body}.${mac.slice(1)}`,
      `${body}x.${mac}`,
      new CursorCodec(randomBytes(32)).encode(ID, fp),
      'x'.repeat(600),
      '.',
      '',
      'no-dot',
    ];
    for (const bad of cases)
      expect(
        code(() => codec.decode(bad, fp)),
        bad,
      ).toBe('CURSOR_INVALID');
    expect(code(() => codec.decode(c, other))).toBe('CURSOR_INVALID');
    expect(code(() => v2.decode(codec.encode('not-a-uuid', fp), fp))).toBe('CURSOR_INVALID');
  });

  it('refuses short keys', () => {
    expect(() => new CursorCodec(randomBytes(16))).toThrow(TypeError);
  });
});

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  bindingOf,
  cookie,
  parseCookies,
  SESSION_TTL_MS,
  sessionCodec,
} from '../../../../src/http/ui/session.ts';

const codec = () => sessionCodec(randomBytes(32), randomBytes(32));

describe('UI sessions (sealed cookies)', () => {
  it('opens what it sealed, and the cookie does not hold the token in clear', () => {
    const c = codec();
    const token = 'eyJhbGciOiJSUzI1NiJ9.secret-token-body.sig';
    const { cookie: sealed, session } = c.seal(token, 1_000);
    expect(sealed).not.toContain('secret-token-body');
    expect(Buffer.from(sealed, 'base64url').toString('latin1')).not.toContain('secret-token-body');
    expect(c.open(sealed, 2_000)).toEqual(session);
    expect(session.exp).toBe(1_000 + SESSION_TTL_MS);
  });

  it('refuses a cookie with any byte changed, one sealed under another key, one expired, and junk', () => {
    const c = codec();
    const { cookie: sealed } = c.seal('token', 0);
    const raw = Buffer.from(sealed, 'base64url');
    for (let i = 0; i < raw.length; i += 7) {
      const altered = Buffer.from(raw);
      altered[i] = altered[i]! ^ 0x01;
      expect(c.open(altered.toString('base64url'), 1), `byte ${i}`).toBeUndefined();
    }
    expect(codec().open(sealed, 1)).toBeUndefined();
    expect(c.open(sealed, SESSION_TTL_MS)).toBeUndefined();
    expect(c.open(sealed, SESSION_TTL_MS - 1)).toBeDefined();
    for (const junk of ['', 'a', 'not base64!', 'x'.repeat(5000)]) expect(c.open(junk)).toBeUndefined();
  });

  it('gives each sign-in its own id, so CSRF tokens of two sessions differ', () => {
    const c = codec();
    const a = c.seal('same-token').session;
    const b = c.seal('same-token').session;
    expect(a.sid).not.toBe(b.sid);
    const ta = c.csrf(bindingOf({ via: 'session', token: a.token, sid: a.sid }));
    expect(c.checkCsrf(bindingOf({ via: 'session', token: a.token, sid: a.sid }), ta)).toBe(true);
    expect(c.checkCsrf(bindingOf({ via: 'session', token: b.token, sid: b.sid }), ta)).toBe(false);
  });

  it('binds a bearer credential to its token, and refuses absent, altered or foreign tokens', () => {
    const c = codec();
    const alice = bindingOf({ via: 'bearer', token: 'alice-token' });
    const bob = bindingOf({ via: 'bearer', token: 'bob-token' });
    expect(alice).not.toContain('alice-token');
    const t = c.csrf(alice);
    expect(c.checkCsrf(alice, t)).toBe(true);
    expect(c.checkCsrf(bob, t)).toBe(false);
    expect(c.checkCsrf(alice, undefined)).toBe(false);
    expect(c.checkCsrf(alice, '')).toBe(false);
    expect(c.checkCsrf(alice, `${t.slice(0, -1)}${t.endsWith('A') ? 'B' : 'A'}`)).toBe(false);
    expect(codec().checkCsrf(alice, t)).toBe(false);
  });

  it('writes HttpOnly, Secure, SameSite=Strict host-only cookies and reads the first value of a name', () => {
    expect(cookie('__Host-x', 'v', 8 * 3600_000)).toBe(
      '__Host-x=v; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=28800',
    );
    expect(cookie('__Host-x', '', 0)).toContain('Max-Age=0');
    expect(parseCookies('a=1; b=2;a=3; =bad; c')).toEqual(
      new Map([
        ['a', '1'],
        ['b', '2'],
      ]),
    );
    expect(parseCookies(undefined).size).toBe(0);
  });

  it('refuses keys that are not 32 bytes', () => {
    expect(() => sessionCodec(randomBytes(16), randomBytes(32))).toThrow(RangeError);
  });
});

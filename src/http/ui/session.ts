import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

/**
 * The UI's session and CSRF tokens (docs/adr/0016-web-ui.md).
 *
 * A session is a sealed cookie: AES-256-GCM over `{v, token, sid, exp}` with a key every replica
 * derives from the vault's shared secret (Vault.deriveKey), so any replica serves any session and
 * only sign-outs are stored server-side (the sidecar scales horizontally and restarts without
 * logging anyone out). The browser keeps only ciphertext: a copied cookie works against this
 * service alone, until `exp` or sign-out (whose `sid` every replica then refuses: the vault's
 * ui_session_revocations, checked by the auth hook), never as a Kubernetes credential. The token inside is reviewed on every request
 * (TokenReview, cached 10 s like every token), so a revoked or expired token ends the session too.
 *
 * CSRF tokens are HMACs of the credential they protect: `sid:<session id>` for a session,
 * `tok:<sha256 of the bearer token>` for a proxy's Authorization header, `signin:<nonce>` before
 * sign-in (the nonce lives in a short-lived cookie: double submit). A page can only include the
 * token of its own viewer; another site can neither read it nor compute it.
 */

export const SESSION_COOKIE = '__Host-aibom-vault-session';
export const SIGNIN_COOKIE = '__Host-aibom-vault-signin';
/** Header a script sends its CSRF token in (state-changing /v1 requests made with the cookie). */
export const CSRF_HEADER = 'x-csrf-token';
/** Form field of the CSRF token (the UI's forms). */
export const CSRF_FIELD = '_csrf';
/** Absolute lifetime of a session; sign in again after it. */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
/** Lifetime of the sign-in form's nonce. */
export const SIGNIN_TTL_MS = 10 * 60 * 1000;
/**
 * Longest token a session holds: the sealed cookie must stay under the 4096 bytes browsers keep
 * (base64url of the JSON plus 28 bytes of IV and tag). Longer tokens work through a proxy's header.
 */
export const MAX_SESSION_TOKEN = 2800;

const AAD = Buffer.from('aibom-vault ui session v1');

export interface Session {
  /** The Kubernetes token the user signed in with. */
  readonly token: string;
  /** Random id of this sign-in (what its CSRF token is bound to). */
  readonly sid: string;
  /** Expiry, epoch milliseconds. */
  readonly exp: number;
}

export interface SessionCodec {
  seal(token: string, now?: number): { cookie: string; session: Session };
  /** The session of a cookie value; undefined when forged, altered, from another key, or expired. */
  open(cookie: string, now?: number): Session | undefined;
  /** The CSRF token bound to `binding` (see bindingOf). */
  csrf(binding: string): string;
  /** Constant-time check of a presented CSRF token. */
  checkCsrf(binding: string, presented: string | undefined): boolean;
}

/** What a credential's CSRF token is bound to. */
export function bindingOf(credential: { via: 'bearer' | 'session'; token: string; sid?: string }): string {
  return credential.via === 'session' && credential.sid !== undefined
    ? `sid:${credential.sid}`
    : `tok:${createHash('sha256').update(credential.token).digest('base64url')}`;
}

/** `sealKey` and `csrfKey`: 32 bytes each, distinct (Vault.deriveKey of two purposes). */
export function sessionCodec(sealKey: Uint8Array, csrfKey: Uint8Array): SessionCodec {
  if (sealKey.length !== 32 || csrfKey.length !== 32) throw new RangeError('session keys are 32 bytes');
  const mac = (binding: string) => createHmac('sha256', csrfKey).update(binding).digest().subarray(0, 24);
  return {
    seal(token, now = Date.now()) {
      const session: Session = {
        token,
        sid: randomBytes(16).toString('base64url'),
        exp: now + SESSION_TTL_MS,
      };
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', sealKey, iv);
      cipher.setAAD(AAD);
      const body = Buffer.concat([
        cipher.update(JSON.stringify({ v: 1, ...session }), 'utf8'),
        cipher.final(),
      ]);
      const cookie = Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
      return { cookie, session };
    },
    open(cookie, now = Date.now()) {
      if (cookie.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(cookie)) return undefined;
      const raw = Buffer.from(cookie, 'base64url');
      if (raw.length < 12 + 16 + 2) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', sealKey, raw.subarray(0, 12));
        decipher.setAAD(AAD);
        decipher.setAuthTag(raw.subarray(raw.length - 16));
        const text = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]);
        const s = JSON.parse(text.toString('utf8')) as Partial<Session> & { v?: unknown };
        if (
          s.v !== 1 ||
          typeof s.token !== 'string' ||
          typeof s.sid !== 'string' ||
          typeof s.exp !== 'number'
        ) {
          return undefined;
        }
        if (s.exp <= now) return undefined;
        return { token: s.token, sid: s.sid, exp: s.exp };
      } catch {
        return undefined; // wrong key, altered bytes: GCM refuses
      }
    },
    csrf: (binding) => mac(binding).toString('base64url'),
    checkCsrf(binding, presented) {
      if (presented === undefined || presented.length > 64) return false;
      const given = Buffer.from(presented, 'base64url');
      const expected = mac(binding);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}

/** The cookies of a Cookie header (first value of each name wins, as browsers send the most specific first). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (header === undefined) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? '' : part.slice(0, eq).trim();
    if (name !== '' && !out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/**
 * A Set-Cookie value: HttpOnly (no script reads it), Secure (HTTPS only; browsers also accept it
 * from http://localhost), SameSite=Strict (never sent on a request another site starts), Path=/ and
 * no Domain (the `__Host-` prefix requires both: no subdomain can set or read it).
 */
export function cookie(name: string, value: string, maxAgeMs: number): string {
  return `${name}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}`;
}

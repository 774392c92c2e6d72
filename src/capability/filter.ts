import { createPublicKey, type KeyObject } from 'node:crypto';
import { readBiscuit } from './biscuit.ts';
import { CapabilityError } from './errors.ts';
import { isScope } from './scope.ts';
import { verifyCredential } from './vc.ts';
import { keyIdOf } from '../signing/index.ts';
import type { CapabilityGrantRepository } from '../vault/index.ts';
import { ProblemError } from '../http/problem.ts';

/**
 * The forms of the query's `capability_token` filter (docs/api.md), each turned into the one entry
 * of the records' `capability_token_ids` it matches:
 *
 * | value                                           | matches                                             |
 * | ----------------------------------------------- | --------------------------------------------------- |
 * | `capability:<run>:<step>:<n>`                   | that capability and the step it authorised          |
 * | a VC-JWT (`application/vc+jwt`) or a Biscuit    | verified, then as its capability                    |
 * | a token id: `urn:aibom-vault:vc:<uuid>`, or a   | the capability of the stored token with that id     |
 * |   Biscuit revocation id (128 hex)               |   (in the namespaces the caller can read)           |
 * | a scope (`kb:read`)                             | every capability granting exactly that scope, and   |
 * |                                                 |   the steps they authorised                          |
 *
 * A pasted token must verify under a root key that signed grants in the namespaces the caller can
 * read, and that key must be the root of the very grant the token names (a token signed by one
 * tenant's key naming another grant's id is CAPABILITY_TOKEN_UNTRUSTED): malformed → 400 CAPABILITY_TOKEN_MALFORMED, signed by anyone else or tampered → 400
 * CAPABILITY_TOKEN_UNTRUSTED, outside its validity → 400 CAPABILITY_TOKEN_EXPIRED. An unknown id
 * matches nothing (200, no items): absence and another tenant's record look alike.
 */

/** Matches no record: an id nothing is indexed under. */
export const NOTHING = 'capability:none';

const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const B64URL = /^[A-Za-z0-9_-]+={0,2}$/;
const REVOCATION_ID = /^[0-9a-f]{128}$/;
const CAPABILITY_ID = /^capability:[^\s]+$/;

const spki = (base64: string): KeyObject =>
  createPublicKey({ key: Buffer.from(base64, 'base64'), format: 'der', type: 'spki' });

/** Biscuit wire format: a protobuf `Biscuit` starts with field 1 (root key id) or 2 (authority). */
function looksLikeBiscuit(value: string): boolean {
  if (value.length < 100 || !B64URL.test(value)) return false;
  const first = Buffer.from(value, 'base64url')[0];
  return first === 0x08 || first === 0x12;
}

function problemOf(err: unknown): ProblemError {
  if (!(err instanceof CapabilityError)) throw err;
  const pointer = [{ pointer: '/body/capability_token', message: err.message }];
  switch (err.code) {
    case 'TOKEN_EXPIRED':
      return new ProblemError(400, 'CAPABILITY_TOKEN_EXPIRED', err.message, { errors: pointer, cause: err });
    case 'TOKEN_UNTRUSTED':
    case 'TOKEN_SIGNATURE_INVALID':
      return new ProblemError(400, 'CAPABILITY_TOKEN_UNTRUSTED', err.message, {
        errors: pointer,
        cause: err,
      });
    default:
      return new ProblemError(400, 'CAPABILITY_TOKEN_MALFORMED', err.message, {
        errors: pointer,
        cause: err,
      });
  }
}

export async function resolveCapabilityFilter(
  value: string,
  namespaces: readonly string[],
  grants: CapabilityGrantRepository,
  now: Date = new Date(),
): Promise<string> {
  if (CAPABILITY_ID.test(value)) return value;
  const byId = async (id: string) => (await grants.grantOfToken(id, namespaces))?.capabilityId ?? NOTHING;
  if (value.startsWith('urn:aibom-vault:vc:') || REVOCATION_ID.test(value)) return byId(value);
  // A verified token resolves only to the grant it was minted for: the key (VC) or root (Biscuit)
  // that verified it must be that grant's own. Verifying under "any root of the caller's
  // namespaces" is not enough, because the claims (the VC's `id`) are chosen by whoever holds any
  // one of those keys: tenant B's key signing a VC that names tenant A's credential id is a valid
  // signature over a lie, and must not reach A's records.
  const notItsGrant = () =>
    new CapabilityError('TOKEN_UNTRUSTED', 'the token is not signed by the root key of the grant it names');
  try {
    if (JWS.test(value)) {
      const roots = await grants.rootKeys(namespaces);
      const keys: KeyObject[] = [...new Set(roots.map((r) => r.publicKey))].map(spki);
      const vc = verifyCredential(value, keys, now);
      const grant = await grants.grantOfToken(String(vc.claims.id), namespaces);
      if (grant === null) return NOTHING;
      if (keyIdOf(spki(grant.publicKey)) !== vc.keyId) throw notItsGrant();
      return grant.capabilityId;
    }
    if (looksLikeBiscuit(value)) {
      const roots = [...new Set((await grants.rootKeys(namespaces)).map((r) => r.biscuitRootKey))];
      const untrusted = new CapabilityError(
        'TOKEN_UNTRUSTED',
        'no root key of your namespaces signed this Biscuit',
      );
      for (const root of roots) {
        let b: Awaited<ReturnType<typeof readBiscuit>>;
        try {
          b = await readBiscuit(value, root);
        } catch (err) {
          if (err instanceof CapabilityError && err.code === 'TOKEN_UNTRUSTED') continue;
          throw err;
        }
        if (b.claims.validUntil !== null && b.claims.validUntil < now)
          throw new CapabilityError(
            'TOKEN_EXPIRED',
            `Biscuit expired at ${b.claims.validUntil.toISOString()}`,
          );
        const grant = await grants.grantOfToken(b.id, namespaces);
        if (grant === null) return NOTHING;
        if (grant.biscuitRootKey !== root) throw notItsGrant();
        return grant.capabilityId;
      }
      throw untrusted;
    }
  } catch (err) {
    throw problemOf(err);
  }
  if (isScope(value)) return `scope:${value}`;
  throw new ProblemError(
    400,
    'CAPABILITY_TOKEN_MALFORMED',
    'capability_token is neither a token (VC-JWT or Biscuit), a token id, a capability id nor a scope',
    { errors: [{ pointer: '/body/capability_token', message: 'unrecognised form' }] },
  );
}

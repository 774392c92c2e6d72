import { createPublicKey, type KeyObject } from 'node:crypto';
import { readBiscuit } from '../capability/biscuit.ts';
import { CapabilityError } from '../capability/errors.ts';
import { isScope } from '../capability/scope.ts';
import { verifyCredential } from '../capability/vc.ts';
import type { CapabilityGrantRepository } from '../vault/index.ts';
import { ProblemError } from './problem.ts';

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
 * read: malformed → 400 CAPABILITY_TOKEN_MALFORMED, signed by anyone else or tampered → 400
 * CAPABILITY_TOKEN_UNTRUSTED, outside its validity → 400 CAPABILITY_TOKEN_EXPIRED. An unknown id
 * matches nothing (200, no items): absence and another tenant's record look alike.
 */

/** Matches no record: an id nothing is indexed under. */
export const NOTHING = 'capability:none';

const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const B64URL = /^[A-Za-z0-9_-]+={0,2}$/;
const REVOCATION_ID = /^[0-9a-f]{128}$/;
const CAPABILITY_ID = /^capability:[^\s]+$/;

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
  const byId = async (id: string) => (await grants.capabilityOfToken(id, namespaces)) ?? NOTHING;
  if (value.startsWith('urn:aibom-vault:vc:') || REVOCATION_ID.test(value)) return byId(value);
  try {
    if (JWS.test(value)) {
      const roots = await grants.rootKeys(namespaces);
      const keys: KeyObject[] = [...new Set(roots.map((r) => r.publicKey))].map((k) =>
        createPublicKey({ key: Buffer.from(k, 'base64'), format: 'der', type: 'spki' }),
      );
      const vc = verifyCredential(value, keys, now);
      return byId(String(vc.claims.id));
    }
    if (looksLikeBiscuit(value)) {
      const roots = [...new Set((await grants.rootKeys(namespaces)).map((r) => r.biscuitRootKey))];
      const untrusted = new CapabilityError(
        'TOKEN_UNTRUSTED',
        'no root key of your namespaces signed this Biscuit',
      );
      for (const root of roots) {
        try {
          const b = await readBiscuit(value, root);
          if (b.claims.validUntil !== null && b.claims.validUntil < now)
            throw new CapabilityError(
              'TOKEN_EXPIRED',
              `Biscuit expired at ${b.claims.validUntil.toISOString()}`,
            );
          return byId(b.id);
        } catch (err) {
          if (err instanceof CapabilityError && err.code === 'TOKEN_UNTRUSTED') continue;
          throw err;
        }
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

import { asInt, cborUint, isMap } from './cbor.ts';
import { Header, type HeaderMap } from './sign1.ts';

/** CWT claim keys (RFC 8392) used in the CWT claims header (label 15, RFC 9597). */
export const Claim = { iss: 1, sub: 2, iat: 6 } as const;

export interface CwtClaims {
  readonly issuer?: string | undefined;
  readonly subject?: string | undefined;
  /** Seconds since the epoch. */
  readonly issuedAt?: number | undefined;
}

/** The claims map for header 15, members in key order (iss, sub, iat); absent claims left out. */
export function cwtClaimsMap(claims: CwtClaims): Map<number, unknown> {
  const map = new Map<number, unknown>();
  if (claims.issuer !== undefined) map.set(Claim.iss, claims.issuer);
  if (claims.subject !== undefined) map.set(Claim.sub, claims.subject);
  if (claims.issuedAt !== undefined) map.set(Claim.iat, cborUint(claims.issuedAt));
  return map;
}

/**
 * The CWT claims of a protected header. Each is optional (a statement needs iss and sub, a receipt
 * neither: the caller decides); text claims count only when non-empty strings.
 */
export function readCwtClaims(header: HeaderMap): CwtClaims {
  const claims = header.get(Header.cwtClaims);
  if (!isMap(claims)) return {};
  const text = (label: number): string | undefined => {
    const v = claims.get(label);
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  return { issuer: text(Claim.iss), subject: text(Claim.sub), issuedAt: asInt(claims.get(Claim.iat)) };
}

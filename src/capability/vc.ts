import type { KeyObject } from 'node:crypto';
import { algorithmOf, keyIdOf, verifyWith, type Signer } from '../signing/index.ts';
import type { ChainLink } from './chain.ts';
import { isLowS, toLowS } from './low-s.ts';
import { CapabilityError } from './errors.ts';

/**
 * W3C VC Data Model 2.0 projection of a capability chain, secured with VC-JOSE-COSE as a compact
 * JWS (`application/vc+jwt`). The JWS is assembled here (header.payload.signature, a dozen lines)
 * and signed by the envelope signer itself in IEEE P1363 form (ES256, in low-S form only: see
 * low-s.ts; or EdDSA): no JOSE library on our side, so the JOSE implementations in the tests
 * (joserfc, in the conformance suite) are independent of what they check. `kid` is the signer's
 * key id, `sha256:<hex of SPKI DER>`, the same as the envelopes' `signature.key_id`.
 */

export const VC_MEDIA_TYPE = 'application/vc+jwt';
export const VC_CONTEXT = 'https://www.w3.org/ns/credentials/v2';
export const VC_TYPE = 'CapabilityDelegationCredential';

/** Issuer ids: the root key by id (a URN: the key itself is what is trusted, not a host name). */
export const issuerId = (keyId: string): string => `urn:aibom-vault:key:${keyId}`;
/** Credential ids, one per capability attestation (deterministic: the record's vault id). */
export const credentialId = (capabilityAttestationId: string): string =>
  `urn:aibom-vault:vc:${capabilityAttestationId}`;

export interface CredentialInput {
  readonly namespace: string;
  readonly runId: string;
  readonly stepId: string;
  /** `step:<run>:<step>` */
  readonly step: string;
  /** `capability:<run>:<step>:<n>` */
  readonly capability: string;
  readonly authority: 'service' | 'namespace';
  /** `ed25519/<hex>`: the Biscuit projection's root, vouched for by this (signer-signed) credential. */
  readonly biscuitRootKey: string;
  readonly links: readonly ChainLink[];
  /** The capability attestation, then the step attestation it authorised. */
  readonly evidence: readonly {
    id: string;
    kind: 'capability' | 'step';
    digest: string;
    predicateType: string;
  }[];
  readonly validFrom: Date;
  readonly validUntil: Date;
}

const jwsAlg = (signer: { algorithm: string }): 'ES256' | 'EdDSA' =>
  signer.algorithm === 'ED25519' ? 'EdDSA' : 'ES256';

const b64url = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
const seconds = (d: Date): number => Math.floor(d.getTime() / 1000);
const iso = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The credential (the JWT claims set): VC 2.0 properties plus the registered JWT claims. */
export function credentialOf(
  input: CredentialInput,
  keyId: string,
  capabilityAttestationId: string,
): Record<string, unknown> {
  const last = input.links.at(-1)!;
  const id = credentialId(capabilityAttestationId);
  const issuer = issuerId(keyId);
  const subject = `urn:aibom-vault:${input.step}`;
  return {
    '@context': [VC_CONTEXT],
    id,
    type: ['VerifiableCredential', VC_TYPE],
    issuer: {
      id: issuer,
      name:
        input.authority === 'service'
          ? 'aibom-vault service signer'
          : `aibom-vault namespace ${input.namespace} (customer-supplied key)`,
    },
    validFrom: iso(input.validFrom),
    validUntil: iso(input.validUntil),
    credentialSubject: {
      id: subject,
      step: input.step,
      capability: input.capability,
      namespace: input.namespace,
      runId: input.runId,
      stepId: input.stepId,
      scope: last.scope,
      grantedBy: last.grantedBy,
      approvedBy: last.approvedBy,
      delegations: input.links.map((l) => ({
        scope: l.scope,
        grantedBy: l.grantedBy,
        approvedBy: l.approvedBy,
      })),
      root: { authority: input.authority, keyId, biscuitRootKey: input.biscuitRootKey },
    },
    evidence: input.evidence.map((e) => ({
      id: `urn:uuid:${e.id}`,
      type: [e.kind === 'capability' ? 'CapabilityAttestation' : 'StepAttestation'],
      digest: e.digest,
      predicateType: e.predicateType,
    })),
    // JWT registered claims, equal to the VC properties, for JOSE tooling that checks them.
    iss: issuer,
    jti: id,
    sub: subject,
    iat: seconds(input.validFrom),
    nbf: seconds(input.validFrom),
    exp: seconds(input.validUntil),
  };
}

/** Signs the credential with the envelope signer: compact JWS, `typ: vc+jwt`. */
export function mintCredential(
  signer: Signer,
  input: CredentialInput,
  capabilityAttestationId: string,
): { token: string; id: string } {
  const header = { alg: jwsAlg(signer), kid: signer.keyId, typ: 'vc+jwt', cty: 'vc' };
  const claims = credentialOf(input, signer.keyId, capabilityAttestationId);
  const signingInput = `${b64url(header)}.${b64url(claims)}`;
  const raw = signer.sign(Buffer.from(signingInput, 'ascii'), 'ieee-p1363');
  // ES256: only the low-S form of the signature (low-s.ts), so a credential has one encoding.
  const sig = header.alg === 'ES256' ? toLowS(raw) : raw;
  return { token: `${signingInput}.${sig.toString('base64url')}`, id: claims.id as string };
}

export interface DecodedCredential {
  readonly header: Record<string, unknown>;
  readonly claims: Record<string, unknown>;
  readonly signingInput: Buffer;
  readonly signature: Buffer;
}

const B64URL = /^[A-Za-z0-9_-]+$/;

function jsonPart(part: string, what: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* reported below */
  }
  throw new CapabilityError('TOKEN_MALFORMED', `JWS ${what} is not a JSON object`);
}

/** Splits a compact JWS and parses its header; the payload stays raw until the signature is checked. */
function splitCredential(token: string): { header: Record<string, unknown>; parts: string[] } {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => B64URL.test(p)))
    throw new CapabilityError('TOKEN_MALFORMED', 'not a compact JWS (three base64url parts)');
  const header = jsonPart(parts[0]!, 'header');
  if (header.typ !== 'vc+jwt')
    // Fixed texts here and below: header fields are the caller's, and error details quote none of
    // the request (docs/api.md).
    throw new CapabilityError('TOKEN_MALFORMED', 'JWS typ is not vc+jwt');
  return { header, parts };
}

/**
 * Verifies a VC-JWT under one of `keys` (chosen by `kid`), and its validity window at `at` (skipped
 * when `at` is null). TOKEN_UNTRUSTED when no key has the token's kid, TOKEN_SIGNATURE_INVALID when
 * the key's signature does not verify (checked before the payload is parsed: a changed payload is a
 * bad signature, not a malformed token), TOKEN_EXPIRED outside [validFrom, validUntil].
 */
export function verifyCredential(
  token: string,
  keys: readonly KeyObject[],
  at: Date | null = new Date(),
): DecodedCredential & { keyId: string } {
  const { header, parts } = splitCredential(token);
  const signingInput = Buffer.from(`${parts[0]!}.${parts[1]!}`, 'ascii');
  const signature = Buffer.from(parts[2]!, 'base64url');
  const kid = header.kid;
  const key = keys.find((k) => keyIdOf(k) === kid);
  if (key === undefined) throw new CapabilityError('TOKEN_UNTRUSTED', 'the VC kid names no trusted key');
  const algorithm = algorithmOf(key)!;
  if (header.alg !== jwsAlg({ algorithm }))
    throw new CapabilityError('TOKEN_SIGNATURE_INVALID', 'the JWS alg does not fit the key its kid names');
  if (header.alg === 'ES256' && !isLowS(signature))
    throw new CapabilityError(
      'TOKEN_SIGNATURE_INVALID',
      'VC signature is not in low-S form (an ES256 signature has exactly one accepted encoding)',
    );
  if (!verifyWith(algorithm, key, signingInput, signature, 'ieee-p1363'))
    throw new CapabilityError('TOKEN_SIGNATURE_INVALID', 'VC signature does not verify');
  const claims = jsonPart(parts[1]!, 'payload');
  const shape = credentialShapeProblem(claims);
  if (shape !== undefined) throw new CapabilityError('TOKEN_MALFORMED', shape);
  if (at !== null) {
    const from = new Date(claims.validFrom as string);
    const until = new Date(claims.validUntil as string);
    if (at < from || at > until)
      throw new CapabilityError(
        'TOKEN_EXPIRED',
        `VC is valid from ${from.toISOString()} until ${until.toISOString()}`,
      );
  }
  return { header, claims, signingInput, signature, keyId: kid as string };
}

/** The VC 2.0 data-model checks this projection promises (context, types, issuer, validity, subject). */
export function credentialShapeProblem(c: Record<string, unknown>): string | undefined {
  const ctx = c['@context'];
  if (!Array.isArray(ctx) || ctx[0] !== VC_CONTEXT) return `@context must start with ${VC_CONTEXT}`;
  if (!Array.isArray(c.type) || !c.type.includes('VerifiableCredential'))
    return 'type lacks VerifiableCredential';
  const issuer = c.issuer as { id?: unknown } | undefined;
  if (typeof issuer?.id !== 'string' || !/^[a-z][a-z0-9+.-]*:/.test(issuer.id))
    return 'issuer.id is not a URL';
  for (const f of ['validFrom', 'validUntil'] as const) {
    if (typeof c[f] !== 'string' || Number.isNaN(Date.parse(c[f]))) return `${f} is not a date-time`;
  }
  if (typeof c.credentialSubject !== 'object' || c.credentialSubject === null)
    return 'credentialSubject missing';
  return undefined;
}

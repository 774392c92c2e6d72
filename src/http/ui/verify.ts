import { bundleVerifier, trustBundleOf, TrustBundleError } from '../../attest/trust-bundle.ts';

/**
 * The verification state the run page shows for each attestation: the checks `service-ctl verify
 * --trust-bundle` makes offline (digest, DSSE signature, statement and predicate schema, labels,
 * the certificate chain at the record's RFC 3161 time-stamp against the TSA roots, key rotation),
 * made by the same code (src/attest/trust-bundle.ts) on the record as /v1 served it, against the
 * trust bundle of GET /v1/keys. It tells a record altered in the database from an intact one; it
 * cannot vouch for the service itself, so every row also names the command that checks the same
 * record independently (docs/adr/0016-web-ui.md).
 */

export type VerificationState =
  | { readonly state: 'verified'; readonly keyId: string }
  | { readonly state: 'failed'; readonly problems: readonly string[] }
  | { readonly state: 'unknown_key'; readonly problems: readonly string[] };

/** A verifier over one trust bundle (the body of GET /v1/keys; its certificates parsed once per page). */
export function recordVerifier(keys: unknown): (record: Record<string, unknown>) => VerificationState {
  let verify: ReturnType<typeof bundleVerifier>;
  try {
    verify = bundleVerifier(trustBundleOf(keys));
  } catch (err) {
    if (!(err instanceof TrustBundleError)) throw err;
    const problems = [`the trust bundle of GET /v1/keys is unusable: ${err.message}`];
    return () => ({ state: 'unknown_key', problems });
  }
  return (record) => {
    const { result } = verify(record);
    if (result.ok && result.keyId !== undefined) return { state: 'verified', keyId: result.keyId };
    const problems = result.problems.map((p) => `${p.code}: ${p.message}`);
    return result.problems.every((p) => p.code === 'UNKNOWN_CERTIFICATE')
      ? { state: 'unknown_key', problems }
      : { state: 'failed', problems };
  };
}

import { trustBundleOf, TrustBundleError } from '../../attest/trust-bundle.ts';
import { recordVerifier } from '../../verify/record.ts';

/**
 * The verification state the run page shows for each attestation: the verdict of `service-ctl
 * verify ID --trust-bundle trust` on the record itself (digest, DSSE signature, statement and
 * predicate schema, labels, the certificate chain at the record's RFC 3161 time-stamp against the
 * TSA roots, key rotation, the signer's scope), made by the same function (src/verify/record.ts
 * `recordVerifier`) on the record as /v1 served it, against the trust bundle of GET /v1/keys.
 *
 * The capability chains and their tokens are not checked here: verifying every token of a Run at
 * its limits (256 capabilities, each a VC and a Biscuit) costs seconds of CPU per page load, which
 * would delay every other tenant's requests (issue 28). The CLI command the page names checks them
 * (and the same verdict on the record). It tells a record altered in the database from an intact
 * one; it cannot vouch for the service itself, so every row also names the command that checks the
 * same record independently (docs/adr/0016-web-ui.md).
 */

export type VerificationState =
  | { readonly state: 'verified'; readonly keyId: string }
  | { readonly state: 'failed'; readonly problems: readonly string[] }
  | { readonly state: 'unknown_key'; readonly problems: readonly string[] };

/** A verifier over one trust bundle (the body of GET /v1/keys; its certificates parsed once per page). */
export function uiRecordVerifier(
  keys: unknown,
): (record: Record<string, unknown>) => Promise<VerificationState> {
  let verify: ReturnType<typeof recordVerifier>;
  try {
    verify = recordVerifier({ bundle: trustBundleOf(keys) }, { capabilities: false });
  } catch (err) {
    if (!(err instanceof TrustBundleError)) throw err;
    const problems = [`the trust bundle of GET /v1/keys is unusable: ${err.message}`];
    return () => Promise.resolve({ state: 'unknown_key', problems });
  }
  return async (record) => {
    const { ok, result } = await verify(record);
    if (ok && result.keyId !== undefined) return { state: 'verified', keyId: result.keyId };
    const problems = result.problems.map((p) => `${p.code}: ${p.message}`);
    return result.problems.every((p) => p.code === 'UNKNOWN_CERTIFICATE')
      ? { state: 'unknown_key', problems }
      : { state: 'failed', problems };
  };
}

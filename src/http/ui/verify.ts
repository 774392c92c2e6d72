import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
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
 *
 * Cost (issue 28): checking one record costs milliseconds of CPU (parsing its RFC 3161 token is
 * most of it), all of it on the sidecar's one event loop. So a page checks at most one page of
 * records (src/http/ui/routes.ts), gives the event loop back between records once a slice of
 * {@link SLICE_MS} is used (other requests, other tenants', run in between), and remembers each
 * result (records are immutable; the key covers the record as served and the trust bundle).
 */

export type VerificationState =
  | { readonly state: 'verified'; readonly keyId: string }
  | { readonly state: 'failed'; readonly problems: readonly string[] }
  | { readonly state: 'unknown_key'; readonly problems: readonly string[] };

/** Longest stretch of record checks before the event loop is given back to other requests. */
export const SLICE_MS = 5;

/**
 * Results of earlier checks: least recently used first out, each kept at most `ttlMs` (a record
 * without a trusted time-stamp is judged at the time of the check, so its result may change when
 * its certificate expires).
 */
export class VerificationCache {
  readonly max: number;
  readonly ttlMs: number;
  private readonly now: () => number;
  private readonly entries = new Map<string, { state: VerificationState; at: number }>();
  constructor(max = 8192, ttlMs = 10 * 60_000, now: () => number = Date.now) {
    this.max = max;
    this.ttlMs = ttlMs;
    this.now = now;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): VerificationState | undefined {
    const hit = this.entries.get(key);
    if (hit === undefined) return undefined;
    this.entries.delete(key);
    if (this.now() - hit.at > this.ttlMs) return undefined;
    this.entries.set(key, hit);
    return hit.state;
  }

  set(key: string, state: VerificationState): void {
    this.entries.delete(key);
    this.entries.set(key, { state, at: this.now() });
    while (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
  }
}

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

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * The verification state of each record (in order), against the trust bundle `keys`: from the
 * cache when this record, as served, was checked against this bundle before; else checked, with
 * the event loop given back every {@link SLICE_MS} of checking. The key leaves out `transparency`
 * (it moves from queued to published; no check reads it).
 */
export async function verifyRecords(
  records: readonly Record<string, unknown>[],
  keys: unknown,
  cache: VerificationCache,
): Promise<VerificationState[]> {
  const bundle = sha256(JSON.stringify(keys));
  let verify: ReturnType<typeof uiRecordVerifier> | undefined;
  let sliceStart = performance.now();
  const out: VerificationState[] = [];
  for (const record of records) {
    const { transparency: _moves, ...checked } = record;
    const key = `${bundle}:${sha256(JSON.stringify(checked))}`;
    let state = cache.get(key);
    if (state === undefined) {
      verify ??= uiRecordVerifier(keys);
      state = await verify(record);
      cache.set(key, state);
    }
    out.push(state);
    if (performance.now() - sliceStart >= SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
  return out;
}

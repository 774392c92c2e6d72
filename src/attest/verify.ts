import { createPublicKey, type KeyObject, type X509Certificate } from 'node:crypto';
import { chainFailureCode, validateChain } from '../signing/chain.ts';
import { algorithmOf, keyIdOf, verifyWith } from '../signing/signer.ts';
import { TimestampError } from '../timestamp/errors.ts';
import { verifyTimestamp } from '../timestamp/rfc3161.ts';
import { dsseSignatureBytes } from '../timestamp/sigstore.ts';
import { DIGEST_PATTERN, envelopeDigest } from './digest.ts';
import { decodeBase64Strict, IN_TOTO_PAYLOAD_TYPE, type DsseEnvelope } from './dsse.ts';
import { VerificationError, type Problem } from './errors.ts';
import { canonicalJson } from './json.ts';
import { labelMismatches, type IndexedRecord } from './labels.ts';
import { preAuthEncoding } from './pae.ts';
import { expectedSubject } from './predicates/index.ts';
import { isKnownPredicateType, predicateProblems, statementProblems } from './schemas.ts';
import type { Statement } from './statement.ts';

/**
 * Whom to trust: raw public keys, or a certificate chain that must lead to one of the anchors; and
 * which time-stamping authorities, whose RFC 3161 time-stamp on a record (`signature.timestamp`)
 * then sets the time the chain is judged at.
 */
export type Trust = (
  | { publicKeys: readonly KeyObject[] }
  | {
      /** Leaf first, then intermediates (the signer's `tls.crt`). */
      certificateChain: readonly X509Certificate[];
      /** Root CAs (`ca.crt`). */
      trustAnchors: readonly X509Certificate[];
      /**
       * Time the chain must be valid at when the record has no trusted time-stamp. Default now.
       * Pass the attestation's creation time only when it is itself attested (a transparency
       * receipt), otherwise a compromised expired key could backdate.
       */
      at?: Date;
    }
) & {
  /**
   * Roots of the TSAs whose time-stamps are believed (TSA_TRUST_ANCHORS). A record time-stamped by
   * one has its certificate chain judged at the time-stamp's time, so it verifies after the
   * certificate expired; a time-stamp that does not verify is a problem. Without anchors a
   * time-stamp is not checked and the chain is judged at `at`.
   */
  tsaTrustAnchors?: readonly X509Certificate[];
};

/** A record's time-stamp as the verifier saw it. */
export interface RecordTimestampCheck {
  /** The token's genTime (trusted), or the record's unchecked `signature.timestamp.time`. */
  time: Date;
  tsa: string;
  /** Verified against the TSA trust anchors, over this record's signature. */
  trusted: boolean;
  /** Why it is not trusted. */
  reason?: string;
}

export interface VerificationResult {
  ok: boolean;
  problems: Problem[];
  /**
   * Key id (`sha256:<hex of SPKI DER>`) of the supplied key whose signature verified; that key is
   * trusted only when `ok` (with a certificate chain, the chain may still have failed).
   */
  keyId?: string;
  predicateType?: string;
  /** The decoded statement, when the payload parsed as one. */
  statement?: Statement;
  /** With a certificate chain: the time it was judged at (the trusted time-stamp's, else `at` or now). */
  checkedAt?: Date;
  /** The record's RFC 3161 time-stamp, when it carries one. */
  timestamp?: RecordTimestampCheck;
}

interface TrustedKey {
  key: KeyObject;
  keyId: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Shape of a DSSE envelope, or the reason it is not one. */
function envelopeShapeProblem(envelope: unknown): string | undefined {
  if (!isObject(envelope)) return 'envelope is not an object';
  if (typeof envelope.payload !== 'string') return 'envelope.payload is not a string';
  if (typeof envelope.payloadType !== 'string') return 'envelope.payloadType is not a string';
  const sigs = envelope.signatures;
  if (!Array.isArray(sigs) || sigs.length === 0) return 'envelope.signatures is not a non-empty array';
  for (const [i, s] of sigs.entries()) {
    if (!isObject(s) || typeof s.sig !== 'string') return `envelope.signatures[${i}].sig is not a string`;
    if (s.keyid !== undefined && typeof s.keyid !== 'string')
      return `envelope.signatures[${i}].keyid is not a string`;
  }
  return undefined;
}

/**
 * Resolves the trust option to keys, reporting chain problems. The chain is judged at `at`; when
 * that is a trusted time-stamp's time, a chain outside its validity then is TIMESTAMP_OUTSIDE_VALIDITY.
 */
function trustedKeys(
  trust: Trust,
  problems: Problem[],
  at: Date,
  stamp: RecordTimestampCheck | undefined,
): TrustedKey[] {
  let keys: readonly KeyObject[];
  if ('publicKeys' in trust) {
    keys = trust.publicKeys;
    if (keys.length === 0) problems.push({ code: 'UNTRUSTED_KEY', message: 'no trusted key was supplied' });
  } else {
    const leaf = trust.certificateChain[0];
    const chain = validateChain(trust.certificateChain, trust.trustAnchors, at);
    if (!chain.ok) {
      const timed = chain.failure === 'EXPIRED' || chain.failure === 'NOT_YET_VALID';
      if (timed && stamp?.trusted === true) {
        problems.push({
          code: 'TIMESTAMP_OUTSIDE_VALIDITY',
          message: `the signature was time-stamped at ${at.toISOString()} by ${stamp.tsa}: ${chain.message}`,
        });
      } else {
        problems.push({ code: chainFailureCode(chain.failure, 'UNTRUSTED_KEY'), message: chain.message });
      }
    }
    // The leaf key is still checked against the signature, so that a result lists a bad
    // signature too and not only the chain problem; ok stays false either way.
    keys = leaf !== undefined ? [leaf.publicKey] : [];
  }
  const out: TrustedKey[] = [];
  for (const given of keys) {
    const key = given.type === 'private' ? createPublicKey(given) : given;
    if (algorithmOf(key) === undefined) {
      problems.push({
        code: 'UNTRUSTED_KEY',
        message: `unsupported key type ${key.asymmetricKeyType ?? 'unknown'}`,
      });
      continue;
    }
    out.push({ key, keyId: keyIdOf(key) });
  }
  return out;
}

/**
 * Checks the signatures: valid when any signature verifies under any trusted key. When none does,
 * the keyid hints (unauthenticated, used only to choose the message) tell "made by a key we trust
 * but broken" (SIGNATURE_INVALID) from "made by someone else" (UNTRUSTED_KEY).
 */
function checkSignatures(
  envelope: DsseEnvelope,
  payload: Buffer,
  keys: TrustedKey[],
  problems: Problem[],
): string | undefined {
  const pae = preAuthEncoding(envelope.payloadType, payload);
  let malformed = 0;
  for (const s of envelope.signatures) {
    const sig = decodeBase64Strict(s.sig);
    if (sig === undefined) {
      malformed++;
      continue;
    }
    for (const k of keys) {
      const algorithm = algorithmOf(k.key);
      if (algorithm !== undefined && verifyWith(algorithm, k.key, pae, sig)) return k.keyId;
    }
  }
  if (keys.length === 0) return undefined; // trustedKeys has reported why
  const hinted = envelope.signatures.some((s) => keys.some((k) => k.keyId === s.keyid));
  if (malformed > 0 && malformed === envelope.signatures.length) {
    problems.push({ code: 'MALFORMED_ENVELOPE', message: 'no signature is standard base64' });
  } else if (hinted || envelope.signatures.every((s) => s.keyid === undefined || s.keyid === '')) {
    problems.push({
      code: 'SIGNATURE_INVALID',
      message: 'signature does not verify over the DSSE PAE bytes',
    });
  } else {
    problems.push({
      code: 'UNTRUSTED_KEY',
      message: `signed by ${envelope.signatures.map((s) => s.keyid).join(', ')}, none of which is trusted`,
    });
  }
  return undefined;
}

/**
 * The record's `signature.timestamp` (docs/timestamps.md): with TSA trust anchors, its token must be
 * over the raw bytes of the envelope's first signature, from a TSA chaining to an anchor, and its
 * stated time must be the token's; then the token's genTime is the time the signer's chain is judged
 * at. Problems are pushed with TIMESTAMP_<code>; a refused time-stamp sets no time.
 */
function checkTimestamp(
  record: Record<string, unknown>,
  envelope: DsseEnvelope,
  trust: Trust,
  problems: Problem[],
): RecordTimestampCheck | undefined {
  const sig = isObject(record.signature) ? record.signature : undefined;
  const ts = sig !== undefined && isObject(sig.timestamp) ? sig.timestamp : undefined;
  if (ts === undefined) return undefined;
  const stated = typeof ts.time === 'string' ? new Date(ts.time) : new Date(NaN);
  const tsa = typeof ts.tsa === 'string' ? ts.tsa : '?';
  if (typeof ts.signed_timestamp !== 'string') {
    problems.push({
      code: 'TIMESTAMP_MALFORMED_TIMESTAMP',
      message: 'signature.timestamp has no signed_timestamp',
    });
    return undefined;
  }
  const anchors = trust.tsaTrustAnchors ?? [];
  if (anchors.length === 0) {
    return { time: stated, tsa, trusted: false, reason: 'no TSA trust anchor was given' };
  }
  const der = decodeBase64Strict(ts.signed_timestamp);
  try {
    if (der === undefined) throw new TimestampError('MALFORMED_TIMESTAMP', 'signed_timestamp is not base64');
    const v = verifyTimestamp(der, { data: dsseSignatureBytes(envelope), trustAnchors: anchors });
    if (stated.getTime() !== v.genTime.getTime()) {
      problems.push({
        code: 'RECORD_MISMATCH',
        message: `signature.timestamp.time ${String(ts.time)} is not the token's time ${v.genTime.toISOString()}`,
      });
    }
    return { time: v.genTime, tsa: v.tsa, trusted: true };
  } catch (err) {
    if (!(err instanceof TimestampError)) throw err;
    problems.push({ code: `TIMESTAMP_${err.code}`, message: `signature time-stamp: ${err.message}` });
    return undefined;
  }
}

/** Statement shape, predicate schema, subject consistency. */
function checkStatement(value: unknown, problems: Problem[]): Statement | undefined {
  const shape = statementProblems(value);
  if (shape.length > 0) {
    problems.push({ code: 'STATEMENT_INVALID', message: `not an in-toto Statement v1: ${shape.join('; ')}` });
    return undefined;
  }
  const statement = value as Statement;
  const type = statement.predicateType;
  if (!isKnownPredicateType(type)) {
    problems.push({ code: 'PREDICATE_TYPE_UNSUPPORTED', message: `no schema for predicate type ${type}` });
    return statement;
  }
  const invalid = predicateProblems(type, statement.predicate) ?? [];
  if (invalid.length > 0) {
    problems.push({ code: 'PREDICATE_INVALID', message: `${type}: ${invalid.join('; ')}` });
    return statement;
  }
  const expected = expectedSubject(type, statement.predicate);
  const actual = statement.subject[0];
  if (
    expected !== undefined &&
    (statement.subject.length !== 1 ||
      actual?.name !== expected.name ||
      actual.digest.sha256 !== expected.digest.sha256)
  ) {
    problems.push({
      code: 'STATEMENT_INVALID',
      message: `subject must be exactly ${expected.name} with sha256 ${expected.digest.sha256}`,
    });
  }
  return statement;
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** Unsigned top-level projections of the API record (and its vault labels) must match what is signed. */
function checkRecordFields(record: Record<string, unknown>, statement: Statement, problems: Problem[]): void {
  if (record.predicate_type !== undefined && record.predicate_type !== statement.predicateType) {
    problems.push({
      code: 'RECORD_MISMATCH',
      message: 'predicate_type differs from the signed predicateType',
    });
  }
  if (record.predicate !== undefined && !sameJson(record.predicate, statement.predicate)) {
    problems.push({ code: 'RECORD_MISMATCH', message: 'predicate differs from the signed predicate' });
  }
  // The labels that decide who sees the record and which queries find it (ADR 0007). Absent fields
  // are not compared; a field of the wrong type never equals a signed one, so it is reported.
  const index = {
    namespace: record.namespace,
    kind: record.kind,
    run_id: record.run_id,
    step_id: record.step_id,
    subjects: record.subjects,
  } as IndexedRecord;
  const mismatched = labelMismatches(index, statement);
  if (mismatched.length > 0) {
    problems.push({
      code: 'LABEL_MISMATCH',
      message: `${mismatched.join(', ')} ${mismatched.length === 1 ? 'differs' : 'differ'} from the labels signed in the statement`,
    });
  }
}

/**
 * Verifies a fetched attestation record offline: `{envelope, digest, …}` as the API returns it
 * (further fields are allowed; `predicate_type`/`predicate`, when present, must match the signed
 * statement). Every independent check runs, so the result lists all problems; `ok` is true only
 * when there are none. Never throws for bad input; see `assertVerified` for throwing.
 */
export function verifyRecord(record: unknown, trust: Trust): VerificationResult {
  const problems: Problem[] = [];
  const fail = (message: string): VerificationResult => ({
    ok: false,
    problems: [{ code: 'MALFORMED_ENVELOPE', message }],
  });
  if (!isObject(record)) return fail('record is not an object');
  const shape = envelopeShapeProblem(record.envelope);
  if (shape !== undefined) return fail(shape);
  // Shape checked just above.
  const envelope = record.envelope as DsseEnvelope;

  if (typeof record.digest !== 'string' || !DIGEST_PATTERN.test(record.digest)) {
    problems.push({ code: 'MALFORMED_ENVELOPE', message: 'digest is not sha256:<64 lower-case hex>' });
  } else {
    let actual: string | undefined;
    try {
      actual = envelopeDigest(envelope);
    } catch {
      actual = undefined; // not canonicalizable JSON: cannot be the stored envelope
    }
    if (actual !== record.digest) {
      problems.push({
        code: 'DIGEST_MISMATCH',
        message: `digest ${record.digest} does not match the envelope (${actual ?? 'not canonicalizable'})`,
      });
    }
  }

  const payload = decodeBase64Strict(envelope.payload);
  if (payload === undefined) {
    problems.push({ code: 'MALFORMED_ENVELOPE', message: 'payload is not standard base64' });
    return { ok: false, problems };
  }

  const stamp = checkTimestamp(record, envelope, trust, problems);
  const at = stamp?.trusted === true ? stamp.time : (('at' in trust ? trust.at : undefined) ?? new Date());
  const keyId = checkSignatures(envelope, payload, trustedKeys(trust, problems, at, stamp), problems);
  const result: VerificationResult = { ok: false, problems };
  if (keyId !== undefined) result.keyId = keyId;
  if ('certificateChain' in trust) result.checkedAt = at;
  if (stamp !== undefined) result.timestamp = stamp;

  if (envelope.payloadType !== IN_TOTO_PAYLOAD_TYPE) {
    problems.push({
      code: 'PAYLOAD_TYPE_UNSUPPORTED',
      message: `payloadType ${envelope.payloadType} is not ${IN_TOTO_PAYLOAD_TYPE}`,
    });
    return result;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch {
    problems.push({ code: 'STATEMENT_INVALID', message: 'payload is not JSON' });
    return result;
  }
  const statement = checkStatement(parsed, problems);
  if (statement !== undefined) {
    result.statement = statement;
    result.predicateType = statement.predicateType;
    checkRecordFields(record, statement, problems);
  }
  result.ok = problems.length === 0 && keyId !== undefined;
  return result;
}

/** Throws `VerificationError` (code of the first problem) unless the result is ok. */
export function assertVerified(
  result: VerificationResult,
): asserts result is VerificationResult & { ok: true } {
  const [first, ...rest] = result.problems;
  if (first !== undefined) throw new VerificationError([first, ...rest]);
  if (!result.ok) {
    throw new VerificationError([{ code: 'SIGNATURE_INVALID', message: 'no trusted signature' }]);
  }
}

import { DIGEST_PATTERN, decodeBase64Strict, PredicateTypes, type DsseEnvelope } from '../../attest/index.ts';
import { checkRun } from '../cyclonedx.ts';
import { AibomError } from '../errors.ts';
import type { Aibom, AibomRun } from '../types.ts';

/**
 * What the standard views are made of: the AIBOM payload, the run it was built from, the digest of
 * its stored bytes and the vault records its `trust.attestation_ids` list, in that order. Every
 * value comes from stored, signed data (the run's spec and phase, the records' envelopes), so the
 * controller at AIBOM time and `service-ctl aibom generate --format` later build the same bytes.
 */
export interface ViewInput {
  readonly run: Pick<AibomRun, 'id' | 'namespace' | 'name' | 'spec' | 'phase'>;
  readonly bom: Aibom;
  /** `sha256:<hex>` of the stored AIBOM bytes (aibomDigest(serializeAibom(bom))). */
  readonly aibomDigest: string;
  /** The records of `bom.trust.attestation_ids`, same ids, same order. */
  readonly records: readonly ViewRecord[];
}

/** One vault record as the views cite it. */
export interface ViewRecord {
  /** The attestation id (UUIDv7, lower case). */
  readonly id: string;
  /** run, step, policy, capability (artifact, aibom never precede the AIBOM). */
  readonly kind: string;
  /** `sha256:<hex>`: the record digest (SHA-256 of the JCS of its DSSE envelope, docs/digest.md). */
  readonly digest: string;
  readonly predicateType: string;
  readonly stepId: string | null;
  /** The signed statement's predicate (decoded from the envelope). */
  readonly predicate: unknown;
}

/** A stored record as the vault returns it, enough to make a ViewRecord. */
export interface StoredRecordLike {
  readonly id: string;
  readonly kind: string;
  readonly digest: string;
  readonly predicateType: string;
  readonly stepId: string | null;
  readonly envelope: DsseEnvelope;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The predicate signed in a record's envelope (undefined when the payload is not a statement). */
export function viewRecordOf(r: StoredRecordLike): ViewRecord {
  let predicate: unknown;
  const payload = decodeBase64Strict(r.envelope.payload);
  if (payload !== undefined) {
    try {
      const statement: unknown = JSON.parse(payload.toString('utf8'));
      if (isRecord(statement)) predicate = statement.predicate;
    } catch {
      predicate = undefined;
    }
  }
  return {
    id: r.id,
    kind: r.kind,
    digest: r.digest,
    predicateType: r.predicateType,
    stepId: r.stepId,
    predicate,
  };
}

/** What a step record says of its step (step predicate fields the views use). */
export interface StepFacts {
  readonly phase: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly pack: { readonly name: string; readonly version: string };
}

export function stepFacts(r: ViewRecord): StepFacts | undefined {
  const p = r.predicate;
  if (r.kind !== 'step' || r.predicateType !== PredicateTypes.step || !isRecord(p)) return undefined;
  const pack = p.policyPack;
  if (
    typeof p.phase !== 'string' ||
    typeof p.startedAt !== 'string' ||
    typeof p.finishedAt !== 'string' ||
    !isRecord(pack) ||
    typeof pack.name !== 'string' ||
    typeof pack.version !== 'string'
  ) {
    return undefined;
  }
  return {
    phase: p.phase,
    startedAt: p.startedAt,
    finishedAt: p.finishedAt,
    pack: { name: pack.name, version: pack.version },
  };
}

/** The run's start and end as its SLSA provenance record states them (runDetails.metadata). */
export function runTimes(r: ViewRecord): { startedOn: string; finishedOn: string } | undefined {
  const p = r.predicate;
  if (r.kind !== 'run' || r.predicateType !== PredicateTypes.provenance || !isRecord(p)) return undefined;
  const details = p.runDetails;
  const meta = isRecord(details) ? details.metadata : undefined;
  if (!isRecord(meta) || typeof meta.startedOn !== 'string' || typeof meta.finishedOn !== 'string') {
    return undefined;
  }
  return { startedOn: meta.startedOn, finishedOn: meta.finishedOn };
}

/** The pack and guardrails a policy record lists. */
export function policyFacts(
  r: ViewRecord,
): { pack: string; version: string; guardrails: readonly string[] } | undefined {
  const p = r.predicate;
  if (r.kind !== 'policy' || r.predicateType !== PredicateTypes.policy || !isRecord(p)) return undefined;
  const g = p.guardrails;
  if (
    typeof p.pack !== 'string' ||
    typeof p.version !== 'string' ||
    !Array.isArray(g) ||
    !g.every((x) => typeof x === 'string')
  ) {
    return undefined;
  }
  return { pack: p.pack, version: p.version, guardrails: g };
}

/**
 * An instant as RFC 3339 UTC with milliseconds (`toISOString`), or undefined for text that is not
 * a time. The pipeline's own text may carry any offset; the views state the same instant in UTC.
 */
export function utcTime(text: string): string | undefined {
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

/** The same instant at SPDX DateTime resolution (`YYYY-MM-DDThh:mm:ssZ`, seconds truncated). */
export function spdxTime(text: string): string | undefined {
  return utcTime(text)?.replace(/\.\d{3}Z$/, 'Z');
}

const SHA256_PREFIXED = DIGEST_PATTERN;

/**
 * The view input must describe one AIBOM: the run is the BOM's (id and DAG digest), the records are
 * exactly its attestation ids in order, every digest is `sha256:<64 hex>`. Throws AibomError
 * RUN_MISMATCH or VIEW_INPUT_MISMATCH (never a silently different view).
 */
export function checkViewInput(input: ViewInput): void {
  const { run, bom, records } = input;
  checkRun(bom, run);
  if (!SHA256_PREFIXED.test(input.aibomDigest)) {
    throw new AibomError('VIEW_INPUT_MISMATCH', `AIBOM digest ${input.aibomDigest} is not sha256:<hex>`);
  }
  const ids = bom.trust.attestation_ids;
  if (records.length !== ids.length || records.some((r, i) => r.id.toLowerCase() !== ids[i])) {
    throw new AibomError(
      'VIEW_INPUT_MISMATCH',
      `the records given (${records.length}) are not the BOM's attestation ids (${ids.length}), in order`,
    );
  }
  for (const r of records) {
    if (!SHA256_PREFIXED.test(r.digest)) {
      throw new AibomError('VIEW_INPUT_MISMATCH', `record ${r.id}: digest ${r.digest} is not sha256:<hex>`);
    }
  }
}

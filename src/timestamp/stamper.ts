import { Counter, type Registry } from 'prom-client';
import { backoffDelay, createQueueLoop, type QueueLoop } from '../queue/queue-loop.ts';
import type { Logger } from '../log/index.ts';
import {
  TIMESTAMP_DUE_CHANNEL,
  type AttestationRepository,
  type ClaimedTimestampJob,
  type SignerCertificateRepository,
  type StoredAttestation,
  type TimestampRepository,
  type VaultListener,
} from '../vault/index.ts';
import type { Timestamper } from './client.ts';
import { TimestampError } from './errors.ts';
import type { VerifiedTimestamp } from './rfc3161.ts';
import { dsseSignatureBytes } from './sigstore.ts';

/**
 * The record stamper (docs/adr/0015-records-stamped-after-they-are-stored.md): every record the
 * recorder stores while a TSA is configured gets a time-stamp job in its append transaction; the
 * stamper of each controller replica claims due jobs (SKIP LOCKED, leased), asks the TSA for an
 * RFC 3161 time-stamp over the envelope's signature (what a Sigstore bundle's
 * `rfc3161Timestamps` holds) and stores it. A TSA that is down or answers wrongly costs a retry
 * with capped backoff, never a record: the record is already stored. A time-stamp is only worth
 * taking while the signer's certificate is valid (its point is to prove the signature existed
 * then), so a job whose certificate expired first fails for good, and so does a token whose time
 * falls outside the certificate's validity.
 */

export interface StampPolicy {
  /** Delay after the first failed attempt; doubles per attempt. */
  readonly baseDelayMs: number;
  /** Cap of the backoff: how often a long outage is probed. */
  readonly maxDelayMs: number;
  /** How long a claim is exclusive; must exceed one `Timestamper.timestamp` call. */
  readonly leaseMs: number;
}

export const DEFAULT_STAMP_POLICY: StampPolicy = Object.freeze({
  baseDelayMs: 1_000,
  maxDelayMs: 5 * 60_000,
  leaseMs: 2 * 60_000,
});

/** The validity of the certificate a record was signed with (null bounds: unknown, e.g. a bare key). */
export interface SignerValidity {
  readonly notBefore: Date | null;
  readonly notAfter: Date | null;
}

export type StampOutcome =
  | { readonly kind: 'store' }
  | { readonly kind: 'retry'; readonly delayMs: number; readonly error: string }
  | { readonly kind: 'final'; readonly error: string };

/**
 * What to do with one attempt (pure): store the time-stamp, retry later, or give up for good.
 * `before` is asked first (no TSA call when the certificate has expired already); `after` judges
 * what the TSA answered.
 */
export const stampOutcome = {
  before(validity: SignerValidity, now: Date): StampOutcome | undefined {
    if (validity.notAfter !== null && now.getTime() > validity.notAfter.getTime()) {
      return {
        kind: 'final',
        error:
          `OUTSIDE_VALIDITY: the signer certificate expired at ${validity.notAfter.toISOString()} ` +
          'before a time-stamp could be taken (a later one would prove nothing)',
      };
    }
    return undefined;
  },
  after(
    result: { readonly stamp: VerifiedTimestamp } | { readonly error: unknown },
    validity: SignerValidity,
    attempts: number,
    policy: StampPolicy,
    random: () => number = Math.random,
  ): StampOutcome {
    if ('error' in result) {
      const err = result.error;
      const code = err instanceof TimestampError ? err.code : 'TSA_UNAVAILABLE';
      // Any failure is retried, a wrong answer too (a TSA misconfigured now may be fixed later):
      // `before` ends the retries once the certificate has expired.
      return {
        kind: 'retry',
        delayMs: backoffDelay(attempts, policy, random),
        error: `${code}: ${(err as Error).message}`,
      };
    }
    const t = result.stamp.genTime.getTime();
    if (
      (validity.notBefore !== null && t < validity.notBefore.getTime()) ||
      (validity.notAfter !== null && t > validity.notAfter.getTime())
    ) {
      return {
        kind: 'final',
        error:
          `OUTSIDE_VALIDITY: the time-stamp's time ${result.stamp.genTime.toISOString()} is outside the signer ` +
          `certificate's validity (${validity.notBefore?.toISOString() ?? '-'} .. ${validity.notAfter?.toISOString() ?? '-'})`,
      };
    }
    return { kind: 'store' };
  },
};

export interface StamperOptions {
  /** The queue and the stored time-stamps (`vault.timestamps`). */
  readonly timestamps: TimestampRepository;
  readonly attestations: Pick<AttestationRepository, 'getMany'>;
  /** The signer history: the validity of the certificate each record names. */
  readonly signers: Pick<SignerCertificateRepository, 'resolve'>;
  readonly tsa: Timestamper;
  /** Wake-ups when records are stored (any replica); without it the stamper polls every `idleMs`. */
  readonly listener?: VaultListener;
  /** Jobs claimed and stamped concurrently per round. Default 8. */
  readonly batchSize?: number;
  readonly idleMs?: number;
  readonly errorDelayMs?: number;
  readonly policy?: Partial<StampPolicy>;
  readonly logger?: Logger;
  readonly registry?: Registry;
  readonly now?: () => Date;
}

export interface Stamper extends QueueLoop {
  /** One round: claims up to a batch, stamps it, returns how many jobs were claimed. */
  drainOnce(): Promise<number>;
}

export function createStamper(options: StamperOptions): Stamper {
  const batchSize = options.batchSize ?? 8;
  const now = options.now ?? (() => new Date());
  const deadline = options.tsa.deadlineMs ?? 0;
  const policy: StampPolicy = {
    ...DEFAULT_STAMP_POLICY,
    // A lease outlives the longest call to the TSA (its deadline, retries included), with margin.
    leaseMs: Math.max(DEFAULT_STAMP_POLICY.leaseMs, 2 * deadline + 10_000),
    ...options.policy,
  };
  const log = options.logger?.child({ component: 'stamper' });
  const outcomes = options.registry
    ? new Counter({
        name: 'aibom_vault_record_timestamp_attempts_total',
        help: 'Attempts to time-stamp a stored record, by outcome (stored, retry, failed: the signer certificate expired first)',
        labelNames: ['outcome'],
        registers: [options.registry],
      })
    : undefined;

  /** Validity of each certificate, by namespace and reference; few distinct ones, read once each. */
  const validities = new Map<string, Promise<SignerValidity>>();
  const validityOf = (record: StoredAttestation): Promise<SignerValidity> => {
    const ref = record.signature.cert_chain_ref;
    if (ref === null || ref === undefined) return Promise.resolve({ notBefore: null, notAfter: null });
    const key = `${record.namespace}\n${ref}`;
    let found = validities.get(key);
    if (found === undefined) {
      found = options.signers.resolve(ref, ['', record.namespace]).then((entries) => {
        const e = entries.find((x) => x.certRef === ref && x.role === 'signer');
        return { notBefore: e?.notBefore ?? null, notAfter: e?.notAfter ?? null };
      });
      // A failed read is not remembered.
      found.catch(() => validities.delete(key));
      validities.set(key, found);
    }
    return found;
  };

  const settle = async (
    job: ClaimedTimestampJob,
    outcome: StampOutcome,
    stamp?: VerifiedTimestamp,
  ): Promise<StampOutcome['kind']> => {
    if (outcome.kind === 'store' && stamp !== undefined) {
      const stored = await options.timestamps.complete(job, {
        genTime: stamp.genTime,
        tsa: stamp.tsa,
        serial: stamp.serial,
        response: stamp.response,
      });
      if (!stored)
        log?.warn({ attestation: job.attestationId }, 'time-stamp lease lost; another stamper holds the job');
    } else if (outcome.kind !== 'store') {
      await options.timestamps.fail(job, {
        final: outcome.kind === 'final',
        error: outcome.error,
        delayMs: outcome.kind === 'retry' ? outcome.delayMs : 0,
      });
    }
    outcomes?.inc({
      outcome: outcome.kind === 'store' ? 'stored' : outcome.kind === 'retry' ? 'retry' : 'failed',
    });
    return outcome.kind;
  };

  const stampOne = async (
    job: ClaimedTimestampJob,
    record: StoredAttestation | undefined,
  ): Promise<{ kind: StampOutcome['kind']; error?: string }> => {
    if (record === undefined) {
      const error = 'the record is not readable';
      return { kind: await settle(job, { kind: 'final', error }), error };
    }
    const validity = await validityOf(record);
    const early = stampOutcome.before(validity, now());
    if (early !== undefined) {
      log?.warn(
        { attestation: job.attestationId, error: early.kind !== 'store' ? early.error : '' },
        'record left without a time-stamp',
      );
      return { kind: await settle(job, early) };
    }
    let data: Buffer;
    try {
      data = dsseSignatureBytes(record.envelope);
    } catch (err) {
      return { kind: await settle(job, { kind: 'final', error: (err as Error).message }) };
    }
    let result: { stamp: VerifiedTimestamp } | { error: unknown };
    try {
      result = { stamp: await options.tsa.timestamp(data) };
    } catch (error) {
      result = { error };
    }
    const outcome = stampOutcome.after(result, validity, job.attempts, policy);
    if (outcome.kind === 'final') {
      log?.warn({ attestation: job.attestationId, error: outcome.error }, 'record left without a time-stamp');
    }
    const kind = await settle(job, outcome, 'stamp' in result ? result.stamp : undefined);
    return outcome.kind === 'retry' ? { kind, error: outcome.error } : { kind };
  };

  const drainOnce = async (): Promise<number> => {
    const jobs = await options.timestamps.claim(batchSize, policy.leaseMs);
    if (jobs.length === 0) return 0;
    const records = await options.attestations.getMany(jobs.map((j) => j.attestationId));
    const results = await Promise.all(jobs.map((j) => stampOne(j, records.get(j.attestationId))));
    const retried = results.filter((r) => r.kind === 'retry');
    // One line per round, not per record: a TSA outage with many records queued stays readable.
    if (retried.length > 0) {
      log?.warn(
        { tsa: options.tsa.url, retried: retried.length, error: retried[0]!.error },
        'time-stamps not taken; the records are stored and will be time-stamped when the TSA answers',
      );
    }
    return jobs.length;
  };

  const loop = createQueueLoop({
    name: 'record stamper',
    round: () => drainOnce(),
    batchSize,
    nextDueInMs: () => options.timestamps.nextDueInMs(),
    channel: TIMESTAMP_DUE_CHANNEL,
    ...(options.listener !== undefined ? { listener: options.listener } : {}),
    ...(options.idleMs !== undefined ? { idleMs: options.idleMs } : {}),
    ...(options.errorDelayMs !== undefined ? { errorDelayMs: options.errorDelayMs } : {}),
    ...(log !== undefined ? { logger: log } : {}),
  });
  return { name: loop.name, drainOnce, run: loop.run, wake: loop.wake };
}

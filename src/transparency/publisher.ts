import type { X509Certificate } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DsseEnvelope } from '../attest/dsse.ts';
import type { Logger } from '../log/index.ts';
import type { Signer } from '../signing/signer.ts';
import { buildSignedStatement } from './statement.ts';
import type { DidX509Policy } from './did-x509.ts';
import { isTransparencyError, TransparencyError } from './errors.ts';
import type { TransparencyJobRepository } from '../vault/index.ts';
import {
  claim,
  DEFAULT_RETRY_POLICY,
  fail,
  type ClaimedJob,
  type Publication,
  type RetryPolicy,
  type TransparencyJob,
} from './jobs.ts';
import type { LocalLog } from './local-log.ts';
import type { ScrapiClient } from './scrapi-client.ts';
import { InvariantError } from '../errors.ts';

/**
 * The domain side of publication (the sigstore-js split: scrapi-client.ts speaks the wire,
 * this owns retries, conflicts and state). One job = extract → sign → submit → store:
 *
 * 1. the statement: the one already fixed on the job, or a new one built from the vault record
 *    (the envelope's digest is recomputed and must equal the stored digest) and fixed on the job
 *    before it is submitted, so every later attempt submits the same bytes;
 * 2. submit to the backend: `local` appends to this service's log (a dry run: nothing leaves the
 *    service), `scrapi` registers with a remote transparency service (published);
 * 3. store entry id, log index, receipt and backend on the job, which makes it immutable.
 *
 * At-least-once: a worker may die between 2 and 3, and the next attempt submits the same
 * statement again; the local log and SCRAPI services answer a known statement with its existing
 * entry, so nothing is registered twice.
 */

export type PublishBackend =
  | { readonly kind: 'local'; readonly log: LocalLog }
  | { readonly kind: 'scrapi'; readonly client: ScrapiClient };

/** What the publisher needs of a vault record (a `StoredAttestation` fits). */
export interface AttestationToPublish {
  readonly id: string;
  readonly envelope: DsseEnvelope;
  /** `sha256:<hex>` as stored; must match the envelope. */
  readonly digest: string;
}

export interface PublisherDeps {
  /** The queue's rows (`vault.transparencyJobs`). */
  readonly jobs: TransparencyJobRepository;
  readonly backend: PublishBackend;
  /** Signs statements: the service signer, with its certificate chain. */
  readonly signer: Signer;
  /** Roots of the signer (`ca.crt`): the issuing one goes into x5chain and is pinned by did:x509. */
  readonly caCertificates?: readonly X509Certificate[];
  /** Loads an attestation by id, across namespaces (e.g. `(id) => vault.get(id)`). */
  readonly loadAttestation: (id: string) => Promise<AttestationToPublish | null>;
  readonly issuerPolicy?: DidX509Policy;
  /** Where verifiers can fetch the envelope (header 260), e.g. `${apiUrl}/v1/attestations/${id}`. */
  readonly payloadLocation?: (attestationId: string) => string | undefined;
  readonly policy?: RetryPolicy;
  readonly logger?: Logger;
  /**
   * How long `publishNow` waits for the outcome of an attempt another worker holds (default
   * {@link DEFAULT_PUSH_WAIT_MS}); past it the push answers with the job queued.
   */
  readonly pushWaitMs?: number;
}

export interface Publisher {
  /**
   * Works one claimed job to its next state. Never throws for the job's own failures (they are
   * recorded on the job); returns the job as stored afterwards, or null when the lease was lost.
   */
  process(job: ClaimedJob, options?: { signal?: AbortSignal }): Promise<TransparencyJob | null>;
  /**
   * Publishes one attestation now (POST /v1/attestations/scitt): enqueues it if needed, takes the
   * job (whatever backoff it waits out) and works it synchronously, or, when a worker holds it,
   * waits for that attempt (at most `pushWaitMs`). Returns the job as it stands: published with its
   * receipt, or queued (the attempt failed and the job is due again later, as its view says, or the
   * other worker's attempt outlasted the wait).
   */
  publishNow(attestationId: string, options?: { signal?: AbortSignal }): Promise<TransparencyJob>;
  /**
   * Registers a signed statement that is not an attestation's (the vault's checkpoints) with the
   * configured backend, once: no job, no retries (the caller retries; registration is idempotent).
   */
  register(statement: Buffer, options?: { signal?: AbortSignal }): Promise<Publication>;
}

const SQLSTATE_FOREIGN_KEY_VIOLATION = '23503';
/** How long a push waits for an attempt another worker is making (PublisherDeps.pushWaitMs). */
export const DEFAULT_PUSH_WAIT_MS = 10_000;
const PUSH_POLL_MS = 100;

/** What the publisher's parts share: its dependencies with the defaults filled in. */
interface Ctx {
  readonly deps: PublisherDeps;
  readonly jobs: TransparencyJobRepository;
  readonly policy: RetryPolicy;
  readonly log: Logger | undefined;
}

function leaseLost(job: TransparencyJob): TransparencyError {
  return new TransparencyError(
    'LEASE_LOST',
    `transparency job ${job.id}: the lease expired and another worker holds the job`,
    { retryable: false },
  );
}

function notInVault(attestationId: string): TransparencyError {
  return new TransparencyError('ATTESTATION_NOT_FOUND', `attestation ${attestationId} is not in the vault`, {
    retryable: false,
  });
}

/**
 * The job's signed statement: the one fixed on it, or one built from the vault record and fixed
 * now. The first statement stored wins; an earlier attempt's may come back instead of ours.
 */
async function statementFor(ctx: Ctx, job: ClaimedJob): Promise<Buffer> {
  if (job.statement !== null) return job.statement;
  const { deps } = ctx;
  const attestation = await deps.loadAttestation(job.attestationId);
  if (attestation === null) throw notInVault(job.attestationId);
  const location = deps.payloadLocation?.(attestation.id);
  const built = buildSignedStatement({
    attestationId: attestation.id,
    envelope: attestation.envelope,
    digest: attestation.digest,
    signer: deps.signer,
    ...(deps.caCertificates !== undefined ? { caCertificates: deps.caCertificates } : {}),
    ...(deps.issuerPolicy !== undefined ? { issuerPolicy: deps.issuerPolicy } : {}),
    ...(location !== undefined ? { payloadLocation: location } : {}),
  });
  const fixed = await ctx.jobs.setStatement(job, built.bytes);
  if (fixed === null) throw leaseLost(job);
  return fixed;
}

/** Submits a statement to the backend: an append to the local log, or a SCRAPI registration. */
async function submit(
  backend: PublishBackend,
  statement: Buffer,
  signal: AbortSignal | undefined,
): Promise<Publication> {
  if (backend.kind === 'local') {
    const entry = await backend.log.append(statement);
    return { backend: 'local', entryId: entry.entryId, logIndex: entry.index, receipt: entry.receipt };
  }
  const registration = await backend.client.register(statement, signal !== undefined ? { signal } : {});
  return {
    backend: 'scrapi',
    entryId: registration.entryId,
    logIndex: registration.leafIndex,
    receipt: registration.receipt,
  };
}

/** Renews the lease every third of it while a slow remote is polled; returns the stop function. */
function keepLease(ctx: Ctx, job: ClaimedJob): () => void {
  const heartbeat = setInterval(
    () => {
      ctx.jobs.renewLease(job, ctx.policy.leaseMs).catch((err: unknown) => {
        ctx.log?.warn({ err, jobId: job.id }, 'could not renew the transparency job lease');
      });
    },
    Math.max(1_000, Math.floor(ctx.policy.leaseMs / 3)),
  );
  heartbeat.unref();
  return () => clearInterval(heartbeat);
}

/**
 * Records a failed attempt on the job. Every failure is retried after a backoff (a job is queued
 * until it is published); a non-retryable one waits `maxDelayMs` (jobs.ts fail). Null when the
 * lease was lost.
 */
async function recordFailure(ctx: Ctx, job: ClaimedJob, err: unknown): Promise<TransparencyJob | null> {
  if (isTransparencyError(err, 'LEASE_LOST')) return null;
  const typed = isTransparencyError(err) ? err : undefined;
  const permanent = typed !== undefined && !typed.retryable;
  const failed = await fail(ctx.jobs, job, `${typed?.code ?? 'ERROR'}: ${(err as Error).message}`, {
    policy: ctx.policy,
    permanent,
    ...(typed?.retryAfterMs !== undefined ? { retryAfterMs: typed.retryAfterMs } : {}),
  });
  if (failed === null) return null;
  ctx.log?.[permanent ? 'error' : 'warn'](
    {
      err,
      jobId: job.id,
      attempts: failed.attempts,
      state: failed.state,
      nextAttemptAt: failed.nextAttemptAt,
    },
    'transparency publication attempt failed',
  );
  return failed;
}

/** Works one claimed job: statement → submit → complete; a failure is recorded on the job. */
async function processJob(
  ctx: Ctx,
  job: ClaimedJob,
  options: { signal?: AbortSignal },
): Promise<TransparencyJob | null> {
  const stopHeartbeat = keepLease(ctx, job);
  try {
    const statement = await statementFor(ctx, job);
    const publication = await submit(ctx.deps.backend, statement, options.signal);
    const done = await ctx.jobs.complete(job, publication);
    if (done === null) {
      ctx.log?.info(
        { jobId: job.id },
        'transparency job lease lost before completion; the new holder finishes it',
      );
      return null;
    }
    ctx.log?.info(
      { jobId: done.id, attestationId: done.attestationId, backend: done.backend, entryId: done.entryId },
      'attestation published to the transparency log',
    );
    return done;
  } catch (err) {
    return recordFailure(ctx, job, err);
  } finally {
    stopHeartbeat();
  }
}

/**
 * A push found the job leased by a worker (the workers are woken by the very enqueue of the push,
 * in this process or another): the push waits for that attempt's outcome, polling the row, for at
 * most `pushWaitMs`, and answers with the job as it then stands (published, or queued with the
 * attempt's error and its next attempt).
 */
async function heldElsewhere(
  ctx: Ctx,
  jobId: string,
  seen: TransparencyJob,
  signal: AbortSignal | undefined,
): Promise<TransparencyJob> {
  const deadline = Date.now() + (ctx.deps.pushWaitMs ?? DEFAULT_PUSH_WAIT_MS);
  let job = seen;
  for (;;) {
    job = (await ctx.jobs.get({ id: jobId })) ?? job;
    if (job.state === 'published' || job.leaseToken === null) return job;
    if (Date.now() >= deadline || signal?.aborted === true) return job;
    await sleep(PUSH_POLL_MS);
  }
}

/** The attestation's job, enqueued if it had none; an attestation not in the vault is ATTESTATION_NOT_FOUND. */
async function jobOf(jobs: TransparencyJobRepository, attestationId: string): Promise<TransparencyJob> {
  let queued: { id: string }[];
  try {
    queued = await jobs.enqueue([attestationId]);
  } catch (err) {
    if ((err as { code?: string }).code === SQLSTATE_FOREIGN_KEY_VIOLATION) throw notInVault(attestationId);
    throw err;
  }
  const jobId = queued[0]!.id;
  const job = await jobs.get({ id: jobId });
  // Invariant: jobs are never deleted (a plain Error, issue 23).
  if (job === null) throw new InvariantError(`transparency job ${jobId} vanished`);
  return job;
}

export function createPublisher(deps: PublisherDeps): Publisher {
  const ctx: Ctx = {
    deps,
    jobs: deps.jobs,
    policy: deps.policy ?? DEFAULT_RETRY_POLICY,
    log: deps.logger?.child({ component: 'transparency-publisher' }),
  };
  const process = (
    job: ClaimedJob,
    options: { signal?: AbortSignal } = {},
  ): Promise<TransparencyJob | null> => processJob(ctx, job, options);

  return {
    process,

    register: (statement, options = {}) => submit(deps.backend, statement, options.signal),

    async publishNow(attestationId, options = {}) {
      const job = await jobOf(ctx.jobs, attestationId);
      if (job.state === 'published') return job;
      const [claimed] = await claim(ctx.jobs, 1, { policy: ctx.policy, jobIds: [job.id], skipBackoff: true });
      if (claimed === undefined) return heldElsewhere(ctx, job.id, job, options.signal);
      return (await process(claimed, options)) ?? (await ctx.jobs.get({ id: job.id })) ?? job;
    },
  };
}

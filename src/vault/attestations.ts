import type pg from 'pg';
import { append, type AppendOptions } from './append.ts';
import { verifyChain, type ChainReport, type VerifyChainOptions } from './chain.ts';
import type { CursorCodec } from './cursor.ts';
import {
  getAttestation,
  getAttestations,
  queryAttestations,
  selectionSize,
  streamAttestations,
  type AttestationFilter,
  type StreamOptions,
  type Page,
  type PageRequest,
} from './query.ts';
import { enqueueTimestampJobs } from './timestamps.ts';
import { enqueueJobs } from './transparency-jobs.ts';
import type { AttestationKind, NewAttestation, StoredAttestation } from './types.ts';
import type { UuidV7Generator } from './uuidv7.ts';

/** What a Kubernetes Attestation resource mirrors of a record (no envelope). */
export interface AttestationSummary {
  readonly id: string;
  readonly kind: AttestationKind;
  readonly predicateType: string;
  readonly subjects: readonly string[];
  readonly digest: string;
}

export interface AttestationAppendOptions {
  /**
   * SERVICE_TRANSPARENCY_WRITER=1: one SCITT job per inserted record, in the same transaction (the
   * record and its job commit together, or neither does).
   */
  readonly enqueueTransparency?: boolean;
  /**
   * TSA_URL set: one time-stamp job per inserted record, in the same transaction (the stamper takes
   * the RFC 3161 time-stamp right after; migration 0013, src/timestamp/stamper.ts).
   */
  readonly enqueueTimestamps?: boolean;
  /** Id generator; defaults to one per process. */
  readonly ids?: UuidV7Generator;
}

/** The append-only attestations table: writes, reads, the hash-chain walk. */
export interface AttestationRepository {
  /** Appends a batch in one transaction; see append.ts for the ordering and idempotency rules. */
  append(input: readonly NewAttestation[], options?: AttestationAppendOptions): Promise<StoredAttestation[]>;
  /** One record, or null when absent or outside `namespaces` (absence and denial look alike). */
  get(id: string, options?: { namespaces?: readonly string[] }): Promise<StoredAttestation | null>;
  /** Many records by id in one query, keyed by (lower-case) id; unknown ids are absent. */
  getMany(ids: readonly string[]): Promise<Map<string, StoredAttestation>>;
  query(filter: AttestationFilter, page?: PageRequest): Promise<Page>;
  stream(
    filter: AttestationFilter,
    options?: StreamOptions,
  ): AsyncGenerator<StoredAttestation, void, undefined>;
  /** How many records match (counting up to `max + 1`) and the head to stream them with (`until`). */
  selectionSize(filter: AttestationFilter, max: number): Promise<{ count: number; until: string | null }>;
  /** The records of one run, in insert order, without their envelopes. */
  ofRun(namespace: string, runId: string): Promise<AttestationSummary[]>;
  /**
   * Ids of the attestations a run's AIBOM lists, in insert order: every record of the run made
   * before its AIBOM attestation (all of them while there is none yet), the AIBOM's own excluded.
   * The recorder and `service-ctl aibom generate` both use this, so both list the same ids; with
   * them the steps that have a step record among these (the steps that ran), in insert order.
   */
  aibomInputs(runId: string): Promise<AibomRecords>;
  /** Every namespace holding at least one record, sorted. */
  namespaces(): Promise<string[]>;
  verifyChain(options: VerifyChainOptions): Promise<ChainReport>;
}

/** What a run's AIBOM is built from (AttestationRepository.aibomInputs). */
export interface AibomRecords {
  /** The records the AIBOM lists (`trust.attestation_ids`), in insert order. */
  readonly ids: string[];
  /** Step ids of the step records among them: the steps that ran. */
  readonly steps: string[];
}

/** The append options for the vault's own multi-table transactions (claims.ts). */
export function appendOptions(
  options: AttestationAppendOptions,
  more?: AppendOptions['inTransaction'],
): AppendOptions {
  const enqueue = options.enqueueTransparency === true;
  const stamp = options.enqueueTimestamps === true;
  return {
    ...(options.ids !== undefined ? { ids: options.ids } : {}),
    ...(enqueue || stamp || more !== undefined
      ? {
          inTransaction: async (client, inserted) => {
            if (enqueue)
              await enqueueJobs(
                client,
                inserted.map((s) => s.id),
              );
            if (stamp)
              await enqueueTimestampJobs(
                client,
                inserted.map((s) => s.id),
              );
            await more?.(client, inserted);
          },
        }
      : {}),
  };
}

/** A record without its capability tokens (the projection switched off: the field disappears). */
function withoutTokens(a: StoredAttestation): StoredAttestation {
  if (a.capabilityTokens === undefined) return a;
  const { capabilityTokens: _dropped, ...rest } = a;
  return rest;
}

/**
 * `capabilityTokens: false` (SERVICE_CAPABILITY_TOKENS=0): reads leave the stored tokens out, so
 * every view built from them (GET, query pages, NDJSON, export bundles) lacks `capability_tokens`.
 */
export function attestationRepository(
  pool: pg.Pool,
  cursors: CursorCodec,
  options: { capabilityTokens?: boolean } = {},
): AttestationRepository {
  const strip = options.capabilityTokens === false;
  const view = strip ? withoutTokens : (a: StoredAttestation) => a;
  return {
    append: (input, options = {}) => append(pool, input, appendOptions(options)),
    get: async (id, options) => {
      const a = await getAttestation(pool, id, options);
      return a === null ? null : view(a);
    },
    getMany: async (ids) => {
      const found = await getAttestations(pool, ids);
      return strip ? new Map([...found].map(([k, a]) => [k, view(a)])) : found;
    },
    query: async (filter, page) => {
      const result = await queryAttestations(pool, cursors, filter, page);
      return strip ? { ...result, items: result.items.map(view) } : result;
    },
    stream: strip
      ? async function* (filter, options) {
          for await (const a of streamAttestations(pool, filter, options)) yield view(a);
        }
      : (filter, options) => streamAttestations(pool, filter, options),
    selectionSize: (filter, max) => selectionSize(pool, filter, max),

    async ofRun(namespace, runId) {
      const { rows } = await pool.query<{
        id: string;
        kind: AttestationKind;
        predicate_type: string;
        subjects: string[];
        digest: string;
      }>({
        name: 'vault_run_summaries',
        text:
          'SELECT id, kind, predicate_type, subjects, digest FROM attestations ' +
          'WHERE run_id = $1::uuid AND namespace = $2 ORDER BY id',
        values: [runId, namespace],
      });
      return rows.map((r) => ({
        id: r.id,
        kind: r.kind,
        predicateType: r.predicate_type,
        subjects: r.subjects,
        digest: r.digest,
      }));
    },

    async aibomInputs(runId) {
      const { rows } = await pool.query<{ id: string; kind: string; step_id: string | null }>({
        name: 'runs_aibom_records',
        text: `SELECT id, kind, step_id FROM attestations
           WHERE run_id = $1::uuid AND kind <> 'aibom'
             AND seq < coalesce((SELECT min(seq) FROM attestations WHERE run_id = $1::uuid AND kind = 'aibom'),
                                9223372036854775807)
           ORDER BY seq`,
        values: [runId],
      });
      return {
        ids: rows.map((r) => r.id),
        steps: rows.flatMap((r) => (r.kind === 'step' && r.step_id !== null ? [r.step_id] : [])),
      };
    },

    async namespaces() {
      // A loose index scan of (namespace, id): one index descent per namespace, not a pass over every row.
      const { rows } = await pool.query<{ namespace: string }>({
        name: 'vault_list_namespaces',
        text: `
      WITH RECURSIVE ns AS (
        (SELECT namespace FROM attestations ORDER BY namespace LIMIT 1)
        UNION ALL
        SELECT (SELECT a.namespace FROM attestations a WHERE a.namespace > ns.namespace ORDER BY a.namespace LIMIT 1)
        FROM ns WHERE ns.namespace IS NOT NULL
      )
      SELECT namespace FROM ns WHERE namespace IS NOT NULL`,
      });
      return rows.map((r) => r.namespace);
    },

    verifyChain: (options) => verifyChain(pool, options),
  };
}

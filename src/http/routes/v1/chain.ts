import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CheckpointError } from '../../../checkpoint/errors.ts';
import { recordLeafHash } from '../../../checkpoint/leaf.ts';
import { consistencyProof, inclusionProof, leafFieldsOf } from '../../../checkpoint/tree.ts';
import { CHECKPOINT_CHANNEL, type StoredCheckpoint, type Vault } from '../../../vault/index.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { problemResponses } from '../../schemas.ts';
import { typed, type TypedApp } from '../../typed.ts';

/**
 * The vault's chain, for verifiers (docs/chain.md, ADR 0008): signed checkpoints of the Merkle tree
 * over every record, RFC 9162 consistency and inclusion proofs, and the leaves themselves.
 *
 * The chain spans all tenants, so it needs its own permission, asked cluster-wide: `get` on
 * `attestations/chain` (and `create` to ask for a checkpoint now). What it shows of any record is
 * its position and leaf hash: the hash of its id, digest and labels, which reveals none of them
 * (the digest covers a randomised signature). A tenant recomputes the leaves of the records it may
 * read from the records themselves, and checks the rest only fold to the signed root.
 */

export interface ChainRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
}

const MAX_LEAVES = 10_000;
const DEFAULT_LEAVES = 1000;
/** Longest a POST waits for the controller's checkpoint before answering 202. */
const MAX_WAIT_SECONDS = 30;
/** Fallback poll while waiting (a NOTIFY normally wakes the wait first). */
const POLL_MS = 1000;

const hex32 = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;
/**
 * Query-string integers arrive as text (the app validates without type coercion): decimal, no sign,
 * at most 15 digits (below 2^53). Read with {@link int}.
 */
const size = { type: 'string', pattern: '^[1-9][0-9]{0,14}$', description: 'positive integer' } as const;
const count = { type: 'string', pattern: '^(0|[1-9][0-9]{0,14})$', description: 'integer ≥ 0' } as const;

function int(raw: string | undefined): number | undefined;
function int(raw: string | undefined, fallback: number): number;
function int(raw: string | undefined, fallback?: number): number | undefined {
  return raw === undefined ? fallback : Number(raw);
}

export const checkpointViewSchema = {
  $id: 'Checkpoint',
  type: 'object',
  required: ['tree_size', 'root_hash', 'last_id', 'statement', 'created_at', 'transparency'],
  properties: {
    tree_size: { type: 'integer', description: 'records covered: seq 1..tree_size' },
    root_hash: { ...hex32, description: 'RFC 9162 Merkle tree head of their leaves (hex)' },
    last_id: { type: 'string', description: 'id of the record at seq = tree_size' },
    statement: {
      type: 'string',
      description: 'the signed checkpoint: COSE_Sign1 (base64) by the service signer, what a verifier keeps',
    },
    created_at: { type: 'string', format: 'date-time' },
    transparency: {
      type: ['object', 'null'],
      description: 'its registration in the transparency log (SERVICE_TRANSPARENCY_WRITER=1)',
      required: ['backend', 'entry_id', 'receipt'],
      properties: {
        backend: { type: 'string', enum: ['local', 'scrapi'] },
        entry_id: { type: 'string' },
        log_index: { type: ['integer', 'null'] },
        receipt: { type: 'string', description: 'COSE receipt (base64)' },
      },
    },
  },
} as const;

function checkpointView(c: StoredCheckpoint) {
  return {
    tree_size: c.treeSize,
    root_hash: c.rootHash.toString('hex'),
    last_id: c.lastId,
    statement: c.statement.toString('base64'),
    created_at: c.createdAt.toISOString(),
    transparency:
      c.receipt === null
        ? null
        : {
            backend: c.receipt.backend,
            entry_id: c.receipt.entryId,
            log_index: c.receipt.logIndex,
            receipt: c.receipt.receipt.toString('base64'),
          },
  };
}

/** `get` (or `create`) on attestations/chain, cluster-wide; 403 otherwise. */
async function authorize(deps: ChainRouteDeps, req: FastifyRequest, verb: 'get' | 'create'): Promise<void> {
  const ok = await isAllowed(deps.authorizer, req, {
    namespace: '',
    verb,
    resource: 'attestations',
    subresource: 'chain',
  });
  if (!ok) {
    throw new ProblemError(403, 'FORBIDDEN', `the chain needs ${verb} on attestations/chain (cluster-wide)`);
  }
}

/** The newest checkpoint, or 404 when none is signed yet. */
async function latest(deps: ChainRouteDeps): Promise<StoredCheckpoint> {
  const c = await deps.vault.checkpoints.get();
  if (c === null) throw new ProblemError(404, 'NOT_FOUND', 'no checkpoint has been signed yet');
  return c;
}

/** A proof over subtrees the database no longer has (or has changed) is a tampered tree. */
async function proof<T>(make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    if (err instanceof CheckpointError) {
      throw new ProblemError(500, 'TREE_DIVERGED', `the stored vault tree is incomplete: ${err.message}`, {
        cause: err,
      });
    }
    throw err;
  }
}

const bad = (pointer: string, message: string): ProblemError =>
  new ProblemError(400, 'VALIDATION_FAILED', message, { errors: [{ pointer, message }] });

/** The answer of a proof route: its two tree positions (named `lower`, `upper`) and the proof. */
function proofAnswer(lower: string, upper: string) {
  return {
    type: 'object',
    required: [lower, upper, 'proof'],
    properties: {
      [lower]: { type: 'integer' },
      [upper]: { type: 'integer' },
      proof: { type: 'array', items: hex32 },
    },
  } as const;
}

/**
 * What both proof routes do: authorise, bound `upper` (default: the newest checkpoint's size) by the
 * newest checkpoint and `lower` (default 0) by `upper`, each refusal naming its query parameter,
 * and prove. Each bound is a [name, raw value] pair.
 */
async function checkedProof(
  deps: ChainRouteDeps,
  req: FastifyRequest,
  lowerParam: readonly [string, string | undefined],
  upperParam: readonly [string, string | undefined],
  prove: (lower: number, upper: number) => Promise<Buffer[]>,
): Promise<{ lower: number; upper: number; proof: string[] }> {
  await authorize(deps, req, 'get');
  const newest = await latest(deps);
  const upper = int(upperParam[1], newest.treeSize);
  const lower = int(lowerParam[1], 0);
  if (upper > newest.treeSize)
    throw bad(`/querystring/${upperParam[0]}`, `must be at most ${newest.treeSize}, the newest checkpoint`);
  if (lower > upper) throw bad(`/querystring/${lowerParam[0]}`, `must not be above ${upperParam[0]}`);
  const hashes = await proof(() => prove(lower, upper));
  return { lower, upper, proof: hashes.map((h) => h.toString('hex')) };
}

export function chainRoutes(fastify: FastifyInstance, deps: ChainRouteDeps): void {
  const app = typed(fastify);
  app.get(
    '/v1/chain/checkpoint',
    {
      schema: {
        summary: 'The newest signed checkpoint of the vault, or the one of tree_size',
        querystring: { type: 'object', additionalProperties: false, properties: { tree_size: size } },
        response: { 200: { $ref: 'Checkpoint#' }, ...problemResponses },
      },
    },
    async (req) => {
      await authorize(deps, req, 'get');
      const size = int(req.query.tree_size);
      if (size === undefined) return checkpointView(await latest(deps));
      const c = await deps.vault.checkpoints.get(size);
      if (c === null) throw new ProblemError(404, 'NOT_FOUND', `no checkpoint of tree size ${size}`);
      return checkpointView(c);
    },
  );

  app.post(
    '/v1/chain/checkpoint',
    {
      schema: {
        summary:
          'Ask the controller for a checkpoint of every record stored now; 200 with it once signed, 202 while it is not yet',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            wait: {
              ...count,
              description: `seconds to wait for it, at most ${MAX_WAIT_SECONDS} (default 10)`,
            },
          },
        },
        response: {
          200: { $ref: 'Checkpoint#' },
          202: {
            type: 'object',
            required: ['status', 'tree_size'],
            properties: { status: { type: 'string', enum: ['requested'] }, tree_size: { type: 'integer' } },
          },
          ...problemResponses,
        },
      },
    },
    async (req, reply) => {
      await authorize(deps, req, 'create');
      const head = await deps.vault.checkpoints.head();
      if (head.seq === 0) throw new ProblemError(404, 'NOT_FOUND', 'the vault holds no records yet');
      const covering = async () => {
        const c = await deps.vault.checkpoints.get();
        return c !== null && c.treeSize >= head.seq ? c : null;
      };
      let c = await covering();
      if (c !== null) return checkpointView(c);
      // Woken by the insert trigger's NOTIFY (any replica's checkpointer), with a slow poll as the
      // fallback while the LISTEN connection is down.
      let wake = (): void => undefined;
      const unsubscribe = await deps.vault.listener.subscribe(CHECKPOINT_CHANNEL, {
        onNotify: () => wake(),
        resync: () => wake(),
      });
      try {
        await deps.vault.checkpoints.request();
        const deadline = Date.now() + Math.min(int(req.query.wait, 10), MAX_WAIT_SECONDS) * 1000;
        while (c === null && Date.now() < deadline) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          c = await covering();
        }
      } finally {
        unsubscribe();
      }
      if (c !== null) return checkpointView(c);
      return reply.code(202).send({ status: 'requested', tree_size: head.seq });
    },
  );
  proofRoutes(app, deps);
  leavesRoute(app, deps);
}

/** GET /v1/chain/consistency and /v1/chain/inclusion: RFC 9162 proofs over checkpointed trees. */
function proofRoutes(app: TypedApp, deps: ChainRouteDeps): void {
  app.get(
    '/v1/chain/consistency',
    {
      schema: {
        summary: 'RFC 9162 consistency proof between two checkpointed tree sizes (to: the newest)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          required: ['from'],
          properties: { from: size, to: size },
        },
        response: {
          200: proofAnswer('from', 'to'),
          ...problemResponses,
          500: { $ref: 'Problem#' },
        },
      },
    },
    async (req) => {
      const p = await checkedProof(deps, req, ['from', req.query.from], ['to', req.query.to], (from, to) =>
        consistencyProof(deps.vault.checkpoints, from, to),
      );
      return { from: p.lower, to: p.upper, proof: p.proof };
    },
  );

  app.get(
    '/v1/chain/inclusion',
    {
      schema: {
        summary:
          'RFC 9162 inclusion proof of the record at seq in a checkpointed tree (tree_size: the newest)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          required: ['seq'],
          properties: { seq: size, tree_size: size },
        },
        response: {
          200: proofAnswer('seq', 'tree_size'),
          ...problemResponses,
          500: { $ref: 'Problem#' },
        },
      },
    },
    async (req) => {
      const p = await checkedProof(
        deps,
        req,
        ['seq', req.query.seq],
        ['tree_size', req.query.tree_size],
        (seq, treeSize) => inclusionProof(deps.vault.checkpoints, seq, treeSize),
      );
      return { seq: p.lower, tree_size: p.upper, proof: p.proof };
    },
  );
}

/** GET /v1/chain/leaves: the leaf hash of every record in seq order, in pages. */
function leavesRoute(app: TypedApp, deps: ChainRouteDeps): void {
  app.get(
    '/v1/chain/leaves',
    {
      schema: {
        summary:
          'The leaf hash of every record in seq order, recomputed from the records as stored now (no record content)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            after_seq: count,
            limit: { ...size, description: `at most ${MAX_LEAVES} (default ${DEFAULT_LEAVES})` },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['items', 'head_seq', 'next_after_seq'],
            properties: {
              items: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['seq', 'leaf_hash'],
                  properties: { seq: { type: 'integer' }, leaf_hash: hex32 },
                },
              },
              head_seq: { type: 'integer', description: 'seq of the newest record when the page was read' },
              next_after_seq: {
                type: ['integer', 'null'],
                description: 'after_seq of the next page; null at the head',
              },
            },
          },
          ...problemResponses,
        },
      },
    },
    async (req) => {
      await authorize(deps, req, 'get');
      const after = int(req.query.after_seq, 0);
      const limit = Math.min(int(req.query.limit, DEFAULT_LEAVES), MAX_LEAVES);
      const head = await deps.vault.checkpoints.head();
      const rows = await deps.vault.checkpoints.leaves(after, head.seq, limit);
      const last = rows.at(-1);
      return {
        items: rows.map((r) => ({ seq: r.seq, leaf_hash: recordLeafHash(leafFieldsOf(r)).toString('hex') })),
        head_seq: head.seq,
        next_after_seq: last !== undefined && last.seq < head.seq ? last.seq : null,
      };
    },
  );
}

export const chainSchemas = [checkpointViewSchema];

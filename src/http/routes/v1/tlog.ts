import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { leafEntry } from '../../../checkpoint/leaf.ts';
import { leafFieldsOf } from '../../../checkpoint/tree.ts';
import { CHECKPOINT_SUBJECT } from '../../../checkpoint/statement.ts';
import { cwtClaims, decodeSign1 } from '../../../transparency/statement.ts';
import { withSignatures } from '../../../tlog/checkpoint.ts';
import { hexKeyId, parseNote } from '../../../tlog/note.ts';
import { parseWitnessVkey } from '../../../tlog/cosignature.ts';
import {
  bundleLeaves,
  encodeEntryBundle,
  parseTilePath,
  tileAvailable,
  tileNodes,
  type TileRef,
} from '../../../tlog/tiles.ts';
import type { StoredNote, TlogName, Vault } from '../../../vault/index.ts';
import { witnessCondition } from '../../../witness/status.ts';
import type { Authorizer } from '../../auth/authorizer.ts';
import { isAllowed } from '../../auth/plugin.ts';
import { ProblemError } from '../../problem.ts';
import { problemResponses } from '../../schemas.ts';

/**
 * The service's two Merkle trees as C2SP tiled logs (c2sp.org/tlog-tiles), read-only, under
 * `/v1/tlog/vault/` (every record, docs/chain.md) and `/v1/tlog/scitt/` (the local SCITT log):
 *
 *   checkpoint                       the newest signed note (c2sp.org/tlog-checkpoint) with the
 *                                    witnesses' cosignature lines; text/plain, cached 5 s
 *   tile/<L>/<N>[.p/<W>]             hashes, 32 bytes each; immutable
 *   tile/entries/<N>[.p/<W>]         entries, uint16-length-prefixed; immutable, gzip on request
 *   witnesses                        (JSON, not tlog-tiles) each witness's Consistent condition
 *
 * Tenancy (docs/transparency.md "Who may read the tiles"): the checkpoint and the hash tiles say
 * how many records there are and nothing about any of them (a leaf hash covers a randomised
 * signature), so they need what the chain API needs, `get` on attestations/chain cluster-wide, or
 * nothing at all when TLOG_PUBLIC=1 (mirrors, monitors, witnesses' operators). An entry names a
 * record: its namespace, run and step ids and subjects (vault), or its id (scitt). An entry bundle
 * is served only to a caller who may also `get` attestations in every namespace the bundle's
 * entries belong to (cluster-wide covers all); the whole bundle or nothing, since an entry that is
 * left out or altered would no longer hash to its tile. Entries that name no record of this vault
 * (another deployment's statements in the SCITT log) need the cluster-wide grant.
 */

export interface TlogRouteDeps {
  readonly vault: Vault;
  readonly authorizer: Authorizer;
  /** TLOG_PUBLIC: the checkpoints and hash tiles answer without authentication. */
  readonly public?: boolean;
  /** TLOG_WITNESSES: listed by the witnesses route even before they first answer. */
  readonly witnesses?: readonly { readonly url: string; readonly vkey: string }[];
}

const LOGS = ['vault', 'scitt'] as const;
const logParam = {
  type: 'object',
  required: ['log'],
  properties: { log: { type: 'string', enum: LOGS } },
} as const;
const tileParams = {
  type: 'object',
  required: ['log', '*'],
  properties: { log: { type: 'string', enum: LOGS }, '*': { type: 'string', maxLength: 128 } },
} as const;
const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;
const binary = (description: string) => ({
  description,
  content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
});

/** Full and partial tiles never change once served: the bytes of a (level, index, width) are fixed. */
const IMMUTABLE = 'max-age=31536000, immutable';
/** The checkpoint moves; the spec asks for at most a few seconds of caching. */
const CHECKPOINT_MAX_AGE = 'max-age=5';

function cacheControl(publicRoute: boolean, policy: string): string {
  return `${publicRoute ? 'public' : 'private'}, ${policy}`;
}

/** `get` on attestations/chain, cluster-wide; 403 otherwise. */
async function authorizeChain(deps: TlogRouteDeps, req: FastifyRequest): Promise<void> {
  const ok = await isAllowed(deps.authorizer, req, {
    namespace: '',
    verb: 'get',
    resource: 'attestations',
    subresource: 'chain',
  });
  if (!ok) {
    throw new ProblemError(
      403,
      'FORBIDDEN',
      'the transparency log tiles need get on attestations/chain (cluster-wide)',
    );
  }
}

/**
 * `get` on attestations in each namespace (all of them with `null` among them: entries that name
 * no record here). One cluster-wide review first; one per namespace otherwise.
 */
async function authorizeEntries(
  deps: TlogRouteDeps,
  req: FastifyRequest,
  namespaces: ReadonlySet<string | null>,
) {
  const get = (namespace: string) =>
    isAllowed(deps.authorizer, req, { namespace, verb: 'get', resource: 'attestations' });
  if (namespaces.size === 0 || (await get(''))) return;
  const denied =
    namespaces.has(null) || (await Promise.all([...namespaces].map((ns) => get(ns!)))).some((ok) => !ok);
  if (denied) {
    throw new ProblemError(
      403,
      'FORBIDDEN',
      'this entry bundle holds records of namespaces you may not read (get on attestations in each, or cluster-wide)',
    );
  }
}

async function newest(deps: TlogRouteDeps, log: TlogName): Promise<StoredNote> {
  const note = await deps.vault.tlog.checkpoint(log);
  if (note === null)
    throw new ProblemError(404, 'NOT_FOUND', `no checkpoint of the ${log} log has been signed yet`);
  return note;
}

function tileOf(rest: string): TileRef {
  try {
    return parseTilePath(rest);
  } catch (err) {
    const message = (err as Error).message;
    throw new ProblemError(400, 'VALIDATION_FAILED', message, {
      errors: [{ pointer: '/params/*', message }],
    });
  }
}

const diverged = (what: string): ProblemError =>
  new ProblemError(500, 'TREE_DIVERGED', `the stored tree is incomplete: ${what}`);

/** What a checkpoint answer is: the note with every cosignature line the vault holds for it. */
export function servedCheckpoint(note: StoredNote): string {
  return withSignatures(
    parseNote(note.note),
    note.cosignatures.map((c) => c.line),
  );
}

/** The namespace of each SCITT log entry's subject (null: not a record of this vault). */
async function scittNamespaces(vault: Vault, entries: readonly Buffer[]): Promise<Set<string | null>> {
  const subjects = entries.map((e) => {
    try {
      return cwtClaims(decodeSign1(e, 'MALFORMED_STATEMENT').protectedHeader)?.subject ?? null;
    } catch {
      return null;
    }
  });
  const ids = subjects.filter(
    (s): s is string =>
      s !== null && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(s),
  );
  const found = await vault.tlog.namespacesOf(ids);
  const out = new Set<string | null>();
  for (const s of subjects) {
    if (s === CHECKPOINT_SUBJECT) continue; // the vault's own checkpoints name no tenant
    out.add(s === null ? null : (found.get(s) ?? null));
  }
  return out;
}

function sendBinary(
  req: FastifyRequest,
  reply: FastifyReply,
  body: Buffer,
  cache: string,
  compress: boolean,
) {
  void reply.type('application/octet-stream').header('cache-control', cache);
  const accepts = String(req.headers['accept-encoding'] ?? '');
  if (compress && /\bgzip\b/.test(accepts)) {
    return reply.header('content-encoding', 'gzip').header('vary', 'accept-encoding').send(gzipSync(body));
  }
  return reply.send(body);
}

export function tlogRoutes(app: FastifyInstance, deps: TlogRouteDeps): void {
  const publicRoute = deps.public === true;

  app.get<{ Params: { log: TlogName } }>(
    '/v1/tlog/:log/checkpoint',
    {
      config: { public: publicRoute },
      schema: {
        summary: 'The newest C2SP signed-note checkpoint of a log, with its witness cosignatures',
        params: logParam,
        querystring: noQuery,
        response: {
          200: {
            description: 'c2sp.org/tlog-checkpoint',
            content: { 'text/plain; charset=utf-8': { schema: { type: 'string' } } },
          },
          ...problemResponses,
        },
      },
    },
    async (req, reply) => {
      if (!publicRoute) await authorizeChain(deps, req);
      const note = await newest(deps, req.params.log);
      return reply
        .type('text/plain; charset=utf-8')
        .header('cache-control', cacheControl(publicRoute, CHECKPOINT_MAX_AGE))
        .send(servedCheckpoint(note));
    },
  );

  app.get<{ Params: { log: TlogName; '*': string } }>(
    '/v1/tlog/:log/tile/*',
    {
      config: { public: publicRoute },
      schema: {
        summary: 'A c2sp.org/tlog-tiles hash tile: tile/<L>/<N>[.p/<W>]',
        params: tileParams,
        querystring: noQuery,
        response: { 200: binary('32-byte hashes'), ...problemResponses, 500: { $ref: 'Problem#' } },
      },
    },
    async (req, reply) => {
      if (!publicRoute) await authorizeChain(deps, req);
      const { log } = req.params;
      const tile = tileOf(req.params['*']);
      if (tile.level === 'entries') throw new ProblemError(404, 'NOT_FOUND', 'no such tile');
      const note = await newest(deps, log);
      if (!tileAvailable(tile, note.treeSize)) {
        throw new ProblemError(
          404,
          'NOT_FOUND',
          `the ${log} log's checkpoint of ${note.treeSize} has no such tile`,
        );
      }
      const { level, first, count } = tileNodes(tile);
      const hashes = await deps.vault.tlog.tileHashes(log, level, first, count);
      if (hashes.length !== count)
        throw diverged(`tile ${req.params['*']} lacks ${count - hashes.length} hashes`);
      return sendBinary(req, reply, Buffer.concat(hashes), cacheControl(publicRoute, IMMUTABLE), false);
    },
  );

  // A route of its own (the static segment wins over the hash tiles' wildcard): entry bundles
  // always authenticate, whatever TLOG_PUBLIC says.
  app.get<{ Params: { log: TlogName; '*': string } }>(
    '/v1/tlog/:log/tile/entries/*',
    {
      schema: {
        summary: 'A c2sp.org/tlog-tiles entry bundle: tile/entries/<N>[.p/<W>]',
        params: tileParams,
        querystring: noQuery,
        response: {
          200: binary('uint16-length-prefixed entries'),
          ...problemResponses,
          500: { $ref: 'Problem#' },
        },
      },
    },
    async (req, reply) => {
      await authorizeChain(deps, req);
      const { log } = req.params;
      const tile = tileOf(`entries/${req.params['*']}`);
      const note = await newest(deps, log);
      if (!tileAvailable(tile, note.treeSize)) {
        throw new ProblemError(
          404,
          'NOT_FOUND',
          `the ${log} log's checkpoint of ${note.treeSize} has no such entry bundle`,
        );
      }
      const { start, end } = bundleLeaves(tile);
      let entries: Buffer[];
      let namespaces: Set<string | null>;
      if (log === 'vault') {
        const rows = await deps.vault.checkpoints.leaves(start, end, end - start);
        if (rows.length !== end - start || rows.some((r, i) => r.seq !== start + i + 1)) {
          throw diverged(`records ${start + 1}…${end} are not all stored`);
        }
        entries = rows.map((r) => leafEntry(leafFieldsOf(r)));
        namespaces = new Set(rows.map((r) => r.namespace));
      } else {
        entries = await deps.vault.tlog.scittEntries(start, end - start);
        if (entries.length !== end - start)
          throw diverged(`SCITT log entries ${start}…${end - 1} are not all stored`);
        namespaces = await scittNamespaces(deps.vault, entries);
      }
      await authorizeEntries(deps, req, namespaces);
      // Entry bundles name tenants' records: never kept by a shared cache.
      return sendBinary(req, reply, encodeEntryBundle(entries), cacheControl(false, IMMUTABLE), true);
    },
  );

  witnessesRoute(app, deps);
}

/** GET /v1/tlog/{log}/witnesses: each witness's Consistent condition for a log. */
function witnessesRoute(app: FastifyInstance, deps: TlogRouteDeps): void {
  app.get<{ Params: { log: TlogName } }>(
    '/v1/tlog/:log/witnesses',
    {
      schema: {
        summary:
          "Each witness's Consistent condition for a log (the split-view alarm) and the newest checkpoint it cosigned",
        params: logParam,
        querystring: noQuery,
        response: {
          200: {
            type: 'object',
            required: ['log', 'checkpoint', 'witnesses'],
            properties: {
              log: { type: 'string' },
              checkpoint: {
                type: ['object', 'null'],
                required: ['origin', 'tree_size', 'cosigned_by'],
                properties: {
                  origin: { type: 'string' },
                  tree_size: { type: 'integer' },
                  cosigned_by: { type: 'array', items: { type: 'string' } },
                },
              },
              witnesses: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['name', 'key_id', 'cosigned_size', 'conditions'],
                  properties: {
                    name: { type: 'string' },
                    key_id: { type: 'string' },
                    cosigned_size: { type: ['integer', 'null'] },
                    cosigned_at: { type: ['string', 'null'], format: 'date-time' },
                    conditions: {
                      type: 'array',
                      items: {
                        type: 'object',
                        required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
                        properties: {
                          type: { type: 'string' },
                          status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                          reason: { type: 'string' },
                          message: { type: 'string' },
                          lastTransitionTime: { type: ['string', 'null'], format: 'date-time' },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
          ...problemResponses,
        },
      },
    },
    async (req) => {
      await authorizeChain(deps, req);
      const { log } = req.params;
      const [note, records] = await Promise.all([
        deps.vault.tlog.checkpoint(log),
        deps.vault.tlog.witnesses(log),
      ]);
      // Configured witnesses that never answered: listed, their condition Unknown (NoAnswer).
      const silent = (deps.witnesses ?? [])
        .map((w) => parseWitnessVkey(w.vkey))
        .filter((k) => !records.some((r) => r.witness === k.name && r.keyId === hexKeyId(k.keyId)))
        .map((k) => ({ witness: k.name, keyId: hexKeyId(k.keyId), cosigned: null, refused: null }));
      return {
        log,
        checkpoint:
          note === null
            ? null
            : {
                origin: note.origin,
                tree_size: note.treeSize,
                cosigned_by: note.cosignatures.map((c) => c.witness),
              },
        witnesses: [...records, ...silent].map((r) => ({
          name: r.witness,
          key_id: r.keyId,
          cosigned_size: r.cosigned?.treeSize ?? null,
          cosigned_at: r.cosigned?.cosignedAt.toISOString() ?? null,
          conditions: [witnessCondition(r)],
        })),
      };
    },
  );
}

import { readFileSync } from 'node:fs';
import { checkServerIdentity, type ConnectionOptions } from 'node:tls';
import pg from 'pg';

/** NOLOGIN role created by migration 0001: SELECT/INSERT on the vault tables, nothing else. */
export const VAULT_WRITER_ROLE = 'vault_writer';

export interface VaultPoolOptions {
  /** Role the sessions assume; `null` keeps the login role (only for tools that need the owner). */
  readonly role?: string | null;
  readonly max?: number;
  readonly idleTimeoutMillis?: number;
  readonly applicationName?: string;
  /** Server-side limit on a session idling inside a transaction (default 60 s). */
  readonly idleInTransactionTimeoutMs?: number;
  /** Called when an idle pooled connection fails (e.g. PostgreSQL restarted). */
  readonly onIdleError?: (err: Error) => void;
  /**
   * Deadline of opening a connection (TCP, TLS, startup, authentication) and of waiting for a free
   * pooled one (default {@link DEFAULT_CONNECT_TIMEOUT_MS}).
   */
  readonly connectTimeoutMs?: number;
  /**
   * Deadline of one statement (default {@link DEFAULT_QUERY_TIMEOUT_MS}): the server cancels it
   * (`statement_timeout`, SQLSTATE 57014), and the client gives up {@link CLIENT_GRACE_MS} later
   * when the server does not answer at all (stopped, partitioned); that connection is then
   * destroyed, not returned to the pool.
   */
  readonly queryTimeoutMs?: number;
  /** TLS with a CA of its own (DATABASE_CA_FILE): see {@link withTls}. */
  readonly tls?: VaultTls;
  /**
   * How named statements are planned (`plan_cache_mode`). `custom` (the default) plans every
   * call with its values: the API's filters (`subjects @> ...`) differ in selectivity by orders of
   * magnitude between values, and a generic plan would be wrong for some of them. `auto` lets
   * PostgreSQL keep a generic plan once it estimates it no dearer than the custom ones: for a
   * process without such filters (the controller: a record by id, a Run's records by run id, claims
   * by key) the plan does not depend on the values, and planning a statement over every attached
   * partition costs several times its execution. Unnamed statements are planned per call either way.
   */
  readonly plans?: PlanCacheMode;
}

/** See {@link VaultPoolOptions.plans}. */
export type PlanCacheMode = 'custom' | 'auto';

/** TLS to PostgreSQL with a CA of its own: a PEM file of the CA(s) its certificate must chain to. */
export interface VaultTls {
  readonly caFile: string;
}

/** Parameters of a connection string that would override the `ssl` option (pg lets the URL win). */
const URL_SSL_PARAMS = [
  'ssl',
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'sslpassword',
  'uselibpqcompat',
];

/**
 * A connection to `connectionString` over TLS verified against the CA of `tls`: the certificate
 * must chain to it and name the URL's host (also when the host is an IP address, where node-postgres
 * would otherwise check the name `localhost`). The URL's own ssl parameters are dropped: they would
 * replace these options.
 */
export function withTls(
  connectionString: string,
  tls: VaultTls,
): { connectionString: string; ssl: ConnectionOptions } {
  const url = new URL(connectionString);
  for (const p of URL_SSL_PARAMS) url.searchParams.delete(p);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return {
    connectionString: url.toString(),
    ssl: {
      ca: readFileSync(tls.caFile, 'utf8'),
      rejectUnauthorized: true,
      checkServerIdentity: (_servername, cert) => checkServerIdentity(host, cert),
    },
  };
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_QUERY_TIMEOUT_MS = 15_000;
/** How much longer than the server-side limit the client waits for an answer. */
export const CLIENT_GRACE_MS = 1_000;

const PLAN_CACHE_MODES: Record<PlanCacheMode, string> = { custom: 'force_custom_plan', auto: 'auto' };

const positiveInt = (name: string, v: number): number => {
  if (!Number.isInteger(v) || v < 1) throw new TypeError(`${name} must be an integer ≥ 1`);
  return v;
};

/**
 * The runtime pool. Every session assumes `vault_writer` through the startup option
 * `-c role=vault_writer`: it applies before the first query (no window in which a query runs as the
 * login role), survives `RESET ALL`/`DISCARD ALL`, and a login that is not a member of the role
 * fails at connect instead of at the first write.
 *
 * Every call has a deadline: connecting (and waiting for a pooled connection) `connectTimeoutMs`, each
 * statement `queryTimeoutMs` on the server and a little more on the client, so a PostgreSQL that hangs
 * (SIGSTOP, a partition) fails callers within seconds instead of holding them (and the controller's
 * workers) forever. The LISTEN connection (listener.ts) is made from these options too.
 *
 * Queries are prepared by name (parse and analysis once per connection); by default
 * (`plan_cache_mode=force_custom_plan`) they are planned per call, because the selectivity of the
 * array filters (`subjects @> ...`) differs by orders of magnitude between values and a generic plan
 * would be wrong for some of them. `plans: 'auto'` is for processes without such filters
 * ({@link VaultPoolOptions.plans}).
 */
export function createVaultPool(connectionString: string, options: VaultPoolOptions = {}): pg.Pool {
  const url = new URL(connectionString);
  const idleMs = options.idleInTransactionTimeoutMs ?? 60_000;
  if (!Number.isInteger(idleMs) || idleMs < 0)
    throw new TypeError('idleInTransactionTimeoutMs must be an integer ≥ 0');
  const plans = options.plans ?? 'custom';
  // Not only a type: a caller in plain JavaScript would otherwise send `plan_cache_mode=undefined`.
  if (!Object.hasOwn(PLAN_CACHE_MODES, plans))
    throw new TypeError(`plans must be one of ${Object.keys(PLAN_CACHE_MODES).join(', ')}`);
  const connectMs = positiveInt('connectTimeoutMs', options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  const queryMs = positiveInt('queryTimeoutMs', options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS);
  // An `options` parameter in the URL would replace ours (pg lets the URL win): merge them.
  const startup = [
    url.searchParams.get('options') ?? '',
    `-c plan_cache_mode=${PLAN_CACHE_MODES[plans]}`,
    // A client that dies or hangs inside an append would otherwise hold the chain head, and with it
    // every writer, until TCP keepalive notices.
    `-c idle_in_transaction_session_timeout=${idleMs}`,
    `-c statement_timeout=${queryMs}`,
  ];
  const role = options.role === undefined ? VAULT_WRITER_ROLE : options.role;
  if (role !== null) {
    if (!/^[a-z_][a-z0-9_]*$/.test(role)) throw new TypeError(`invalid role name ${role}`);
    startup.push(`-c role=${role}`);
  }
  url.searchParams.delete('options');
  const target = options.tls ? withTls(url.toString(), options.tls) : { connectionString: url.toString() };
  const pool = new pg.Pool({
    ...target,
    options: startup.filter((s) => s !== '').join(' '),
    max: options.max ?? 10,
    idleTimeoutMillis: options.idleTimeoutMillis ?? 30_000,
    application_name: options.applicationName ?? 'aibom-vault',
    connectionTimeoutMillis: connectMs,
    // Client side: a server that does not answer at all never sends the statement_timeout error.
    query_timeout: queryMs + CLIENT_GRACE_MS,
    keepAlive: true,
  });
  // An idle client whose connection dies (server restart, terminated backend) is emitted here; with
  // no listener Node would crash the process. The pool has already discarded that client and the
  // next checkout reconnects, so report and carry on.
  pool.on('error', (err) => options.onIdleError?.(err));
  return pool;
}

interface LoginRow {
  login: string;
  rolsuper: boolean;
  rolcreaterole: boolean;
  rolcreatedb: boolean;
  rolbypassrls: boolean;
  rolreplication: boolean;
  owned: string[];
  owner: string | null;
  owner_member: boolean;
}

/**
 * What the runtime login (`session_user`, whatever role the session assumed) can do beyond the
 * runtime role, each a sentence; empty for a login that holds nothing of its own. A superuser or a
 * member of the schema owner can disable the append-only triggers (`SET ROLE` back to the login
 * undoes `-c role=vault_writer`); an owner of anything can alter it.
 */
export async function runtimeRoleProblems(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<LoginRow>({
    name: 'vault_runtime_login',
    text: `
      SELECT r.rolname AS login, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, r.rolreplication,
        ARRAY(SELECT c.relname::text FROM pg_class c
               WHERE c.relowner = r.oid AND c.relnamespace = current_schema()::regnamespace
                 AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
                 -- Partitions go with their parent (named instead): the list stays readable.
                 AND NOT c.relispartition
               ORDER BY c.relname LIMIT 5) AS owned,
        o.rolname AS owner,
        coalesce(pg_has_role(r.oid, o.oid, 'MEMBER'), false) AS owner_member
      FROM pg_roles r
      LEFT JOIN pg_class a ON a.oid = to_regclass('attestations')
      LEFT JOIN pg_roles o ON o.oid = a.relowner
      WHERE r.rolname = session_user`,
  });
  const r = rows[0];
  if (r === undefined) return ['the login role is not in pg_roles'];
  const out: string[] = [];
  if (r.rolsuper) out.push(`${r.login} is a superuser`);
  for (const [attr, set] of [
    ['CREATEROLE', r.rolcreaterole],
    ['CREATEDB', r.rolcreatedb],
    ['BYPASSRLS', r.rolbypassrls],
    ['REPLICATION', r.rolreplication],
  ] as const) {
    if (set) out.push(`${r.login} has ${attr}`);
  }
  if (r.owned.length > 0) out.push(`${r.login} owns ${r.owned.join(', ')}`);
  if (!r.rolsuper && r.owner !== null && r.owner_member)
    out.push(`${r.login} may act as ${r.owner}, the owner of the vault's tables`);
  return out;
}

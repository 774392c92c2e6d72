/**
 * What the restart benchmark counts of the restarted controller (bench/restart.ts), and the messages
 * between the bench and that controller's own process (bench/restart-child.ts).
 *
 * - API: every request it sends that is not a GET/LIST/WATCH and not about its Lease, sorted by the
 *   Run group (`conv-`, `back-`, `fresh-`) its path or JSON body names.
 * - Vault: every statement its pool runs that writes (WRITE_SQL, as the restart tests count), sorted
 *   by the Run uids its parameters hold.
 */
import type pg from 'pg';
import type { DevPki } from '../hack/dev-pki.ts';
import type { KubeClient, RequestSpec } from '../src/kube/index.ts';
import { WRITE_SQL } from '../test/helpers/write-sql.ts';

/** Run names of the three groups: converged, backlog, fresh. */
const NAME = /\b(conv|back|fresh)-\d+\b/g;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** The restarted controller's API writes, sorted by the Run group they name. */
export interface ApiWrites {
  total: number;
  converged: number;
  /** Writes naming a backlog Run: shows the matcher sees what it looks for. */
  backlog: number;
  /** A few converged writes, `METHOD path`, to say what they were. */
  readonly examples: string[];
}

/** The restarted controller's vault write statements: all, and those naming a converged (a backlog) Run's uid. */
export interface VaultWrites {
  total: number;
  converged: number;
  backlog: number;
}

/** Wraps the controller's client: every non-read, non-Lease request is checked for the Runs it names. */
export function auditingClient(inner: KubeClient, writes: ApiWrites): KubeClient {
  return {
    request<T>(spec: RequestSpec): Promise<T> {
      if (spec.method !== 'GET' && !spec.path.includes('/leases/')) {
        writes.total++;
        const text = `${spec.path} ${JSON.stringify(spec.body ?? null)}`;
        const groups = new Set([...text.matchAll(NAME)].map((m) => m[1]));
        if (groups.has('back')) writes.backlog++;
        if (groups.has('conv')) {
          writes.converged++;
          if (writes.examples.length < 5) writes.examples.push(`${spec.method} ${spec.path}`);
        }
      }
      return inner.request<T>(spec);
    },
    stream: (spec, onObject) => inner.stream(spec, onObject),
  };
}

/** Classifies every statement any connection of `pool` runs (pool.query runs on one of them too). */
export function auditPool(
  pool: pg.Pool,
  uids: { converged: ReadonlySet<string>; backlog: ReadonlySet<string> },
  writes: VaultWrites,
): void {
  pool.on('connect', (client) => {
    const target = client as unknown as { query: (...a: unknown[]) => unknown };
    const query = target.query.bind(client);
    target.query = (config: unknown, ...rest: unknown[]) => {
      const cfg = config as { text?: string; values?: unknown } | string | null;
      const text = typeof cfg === 'string' ? cfg : cfg?.text;
      if (typeof text === 'string' && WRITE_SQL.test(text)) {
        writes.total++;
        const values = typeof cfg === 'string' ? rest[0] : cfg?.values;
        const params = Array.isArray(values) ? JSON.stringify(values) : '';
        const named = [...params.matchAll(UUID)].map((m) => m[0].toLowerCase());
        if (named.some((u) => uids.converged.has(u))) writes.converged++;
        if (named.some((u) => uids.backlog.has(u))) writes.backlog++;
      }
      return query(config, ...rest);
    };
  });
}

/** bench → child: everything the controller needs, sent once after the fork. */
export interface ChildInit {
  readonly type: 'init';
  readonly kubeconfig: string;
  readonly dbUrl: string;
  /** The stack's environment (S3 endpoint and keys). */
  readonly env: Record<string, string>;
  /** The dev PKI (PEM files by name) both signers are made from. */
  readonly pki: DevPki;
  readonly leaseName: string;
  readonly watchNamespace: string;
  /** Lower-case uids of the converged and backlog Runs (the vault matcher). */
  readonly convergedUids: readonly string[];
  readonly backlogUids: readonly string[];
}

/** bench → child: wait until idle, then report; or stop and exit (code 0 once stopped). */
export type ParentMessage =
  ChildInit | { readonly type: 'settle'; readonly timeoutMs: number } | { readonly type: 'stop' };

/** The child's process after forced garbage collections (process.memoryUsage, bytes), and its peak RSS. */
export interface MemoryReport {
  readonly heapUsed: number;
  readonly heapTotal: number;
  /** C++ objects bound to JS objects (Buffers' memory among them). */
  readonly external: number;
  readonly arrayBuffers: number;
  readonly rss: number;
  readonly maxRss: number;
  /** Resident bytes by mapping (file path, `[heap]`, `[anon]`), the largest dozen; empty off Linux. */
  readonly mappings: [string, number][];
  /** Last-resort collections the process's heap release had run so far (src/bin/heap-release.ts). */
  readonly heapReleases: number;
}

/** What the child measured, once it was idle after the drain. */
export interface ChildReport {
  readonly type: 'report';
  readonly reconciles: number;
  readonly byCategory: [string, number][];
  readonly failures: [string, number][];
  readonly api: ApiWrites;
  readonly vault: VaultWrites;
  /** The controller process itself 1.5 s after its last reconcile, after forced garbage collections. */
  readonly memory: MemoryReport;
  /**
   * The same once the Biscuit worker has stopped for want of work (src/capability/biscuit-host.ts,
   * about ten seconds later) and the process has been idle for 15 s (three of its heap release's
   * readings): what a controller at rest holds.
   */
  readonly atRest: MemoryReport;
}

/** child → bench. */
export type ChildMessage =
  { readonly type: 'leading' } | ChildReport | { readonly type: 'error'; readonly message: string };

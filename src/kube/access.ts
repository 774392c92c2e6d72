import { readFile } from 'node:fs/promises';
import type { RequestOptions } from 'node:http';
import type { AgentOptions } from 'node:https';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import { BaseError } from '../errors.ts';

/**
 * How the client reaches the API server: its URL and the credentials of each request. These are
 * the two methods of @kubernetes/client-node's KubeConfig that src/kube/client.ts uses, so a
 * KubeConfig is one too (tests and tools pass theirs).
 *
 * The service's processes load their own (`loadKubeAccess`) and import client-node only for what
 * this module does not do (exec plugins, auth providers, proxies): importing client-node loads its
 * whole generated API, measured at 79 MiB RSS and 25 MiB of heap in an otherwise empty Node 24
 * process, kept for the life of the controller (docs/bench.md "memory").
 */
export interface KubeAccess {
  getCurrentCluster(): { readonly server: string } | null;
  /** Sets TLS material and the Authorization header on `opts`; called before every request. */
  applyToHTTPSOptions(opts: RequestOptions & AgentOptions): Promise<void>;
}

/** A kubeconfig that cannot be used, or no cluster to be in: one line saying which and why. */
export type KubeAccessErrorCode = 'KUBECONFIG_INVALID' | 'NOT_IN_CLUSTER';
export class KubeAccessError extends BaseError<KubeAccessErrorCode> {}

/** Where a pod's service account is mounted (the API server's defaults). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * How long a credential file read from disk is used before it is read again. A projected service
 * account token is rotated by the kubelet (refreshed at 80% of its hour); client-go re-reads it
 * every minute, and so does this. Certificate files rotated in place are picked up as well.
 */
const REREAD_MS = 60_000;

/** A file's content, read again once it is older than REREAD_MS. */
class FileSource {
  private cached: { at: number; data: Buffer } | undefined;
  readonly path: string;
  constructor(path: string) {
    this.path = path;
  }

  async read(now = Date.now()): Promise<Buffer> {
    if (this.cached === undefined || now - this.cached.at >= REREAD_MS) {
      this.cached = { at: now, data: await readFile(this.path) };
    }
    return this.cached.data;
  }
}

type Material = { readonly file: FileSource } | { readonly data: Buffer };

async function materialOf(m: Material | undefined): Promise<Buffer | undefined> {
  if (m === undefined) return undefined;
  return 'data' in m ? m.data : m.file.read();
}

interface Resolved {
  readonly server: string;
  readonly ca?: Material;
  readonly cert?: Material;
  readonly key?: Material;
  readonly token?: Material;
  readonly basic?: string;
  readonly insecure: boolean;
  readonly servername?: string;
  readonly impersonate?: string;
}

/** Static credentials: a client certificate, a bearer token (or its file), basic auth. */
class StaticAccess implements KubeAccess {
  private readonly r: Resolved;
  constructor(r: Resolved) {
    this.r = r;
    if (r.server.startsWith('http:') && !r.insecure) {
      // As client-node: plain HTTP only when TLS verification is explicitly off.
      throw new KubeAccessError(
        'KUBECONFIG_INVALID',
        `kubeconfig: server ${r.server} is plain HTTP; that needs insecure-skip-tls-verify: true`,
      );
    }
  }

  getCurrentCluster(): { readonly server: string } {
    return { server: this.r.server };
  }

  async applyToHTTPSOptions(opts: RequestOptions & AgentOptions): Promise<void> {
    const [ca, cert, key, token] = await Promise.all([
      materialOf(this.r.ca),
      materialOf(this.r.cert),
      materialOf(this.r.key),
      materialOf(this.r.token),
    ]);
    if (ca) opts.ca = ca;
    if (cert) opts.cert = cert;
    if (key) opts.key = key;
    if (this.r.insecure) opts.rejectUnauthorized = false;
    if (this.r.servername !== undefined) opts.servername = this.r.servername;
    const headers = (opts.headers ?? {}) as Record<string, string>;
    if (token) headers.authorization = `Bearer ${token.toString('utf8').trim()}`;
    if (this.r.impersonate !== undefined) headers['impersonate-user'] = this.r.impersonate;
    opts.headers = headers;
    if (this.r.basic !== undefined) opts.auth = this.r.basic;
  }
}

/**
 * The pod's service account, as client-go's rest.InClusterConfig: the API server at
 * KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT over HTTPS, the mounted CA, the mounted token
 * (re-read every minute: the kubelet rotates it).
 */
export function inClusterAccess(
  env: NodeJS.ProcessEnv = process.env,
  dir: string = SERVICE_ACCOUNT_DIR,
): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new KubeAccessError(
      'NOT_IN_CLUSTER',
      'not running in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset): set KUBECONFIG',
    );
  }
  return new StaticAccess({
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    ca: { file: new FileSource(join(dir, 'ca.crt')) },
    token: { file: new FileSource(join(dir, 'token')) },
    insecure: false,
  });
}

type Yaml = Record<string, unknown>;

const isObject = (v: unknown): v is Yaml => typeof v === 'object' && v !== null && !Array.isArray(v);

function named(doc: Yaml, list: 'clusters' | 'users' | 'contexts', name: string, file: string): Yaml {
  const entries = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
  const key = list.slice(0, -1);
  const found = entries.find((e) => isObject(e) && e.name === name);
  const body = isObject(found) ? found[key] : undefined;
  if (!isObject(body))
    throw new KubeAccessError('KUBECONFIG_INVALID', `kubeconfig ${file}: no ${key} named "${name}"`);
  return body;
}

function str(o: Yaml, field: string, file: string): string | undefined {
  const v = o[field];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string')
    throw new KubeAccessError('KUBECONFIG_INVALID', `kubeconfig ${file}: ${field} must be a string`);
  return v;
}

/** A file a kubeconfig names: relative paths are relative to its directory, as kubectl resolves them. */
const fileOf = (kubeconfig: string, path: string): { readonly file: FileSource } => ({
  file: new FileSource(isAbsolute(path) ? path : join(dirname(kubeconfig), path)),
});

/**
 * One credential from a kubeconfig: `<field>-data` (base64) or `<field>` (a file). The file wins,
 * as in client-node and client-go.
 */
function material(o: Yaml, field: string, file: string): Material | undefined {
  const path = str(o, field, file);
  if (path !== undefined) return fileOf(file, path);
  const data = str(o, `${field}-data`, file);
  return data !== undefined ? { data: Buffer.from(data, 'base64') } : undefined;
}

/** What this module does not implement: such kubeconfigs are handed to client-node. */
function needsClientNode(cluster: Yaml, user: Yaml): boolean {
  return cluster['proxy-url'] !== undefined || user.exec !== undefined || user['auth-provider'] !== undefined;
}

/** A kubeconfig's current context, or undefined when it needs client-node (needsClientNode). */
export function kubeconfigAccess(text: string, file: string): KubeAccess | undefined {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new KubeAccessError(
      'KUBECONFIG_INVALID',
      `kubeconfig ${file}: not YAML: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  if (!isObject(doc))
    throw new KubeAccessError('KUBECONFIG_INVALID', `kubeconfig ${file}: not a kubeconfig (no mapping)`);
  const current = str(doc, 'current-context', file);
  if (current === undefined)
    throw new KubeAccessError('KUBECONFIG_INVALID', `kubeconfig ${file}: no current-context`);
  const context = named(doc, 'contexts', current, file);
  const clusterName = str(context, 'cluster', file);
  const userName = str(context, 'user', file);
  if (clusterName === undefined)
    throw new KubeAccessError(
      'KUBECONFIG_INVALID',
      `kubeconfig ${file}: context "${current}" has no cluster`,
    );
  const cluster = named(doc, 'clusters', clusterName, file);
  const user = userName !== undefined ? named(doc, 'users', userName, file) : {};
  if (needsClientNode(cluster, user)) return undefined;
  const server = str(cluster, 'server', file);
  if (server === undefined)
    throw new KubeAccessError(
      'KUBECONFIG_INVALID',
      `kubeconfig ${file}: cluster "${clusterName}" has no server`,
    );
  const username = str(user, 'username', file);
  const tokenFile = str(user, 'tokenFile', file);
  const token = str(user, 'token', file);
  const servername = str(cluster, 'tls-server-name', file);
  const impersonate = str(user, 'as', file);
  const ca = material(cluster, 'certificate-authority', file);
  const cert = material(user, 'client-certificate', file);
  const key = material(user, 'client-key', file);
  return new StaticAccess({
    server,
    ...(ca ? { ca } : {}),
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(token !== undefined
      ? { token: { data: Buffer.from(token) } }
      : tokenFile !== undefined
        ? { token: fileOf(file, tokenFile) }
        : {}),
    ...(username !== undefined ? { basic: `${username}:${str(user, 'password', file) ?? ''}` } : {}),
    insecure: cluster['insecure-skip-tls-verify'] === true,
    ...(servername !== undefined ? { servername } : {}),
    ...(impersonate !== undefined ? { impersonate } : {}),
  });
}

/**
 * KUBECONFIG when given (its current context), else the pod's service account. A kubeconfig with
 * an exec plugin, an auth provider or a proxy is loaded by @kubernetes/client-node instead.
 */
export async function loadKubeAccess(kubeconfig: string | undefined): Promise<KubeAccess> {
  if (kubeconfig === undefined) return inClusterAccess();
  let text: string;
  try {
    text = await readFile(kubeconfig, 'utf8');
  } catch (err) {
    throw new KubeAccessError(
      'KUBECONFIG_INVALID',
      `KUBECONFIG: cannot read ${kubeconfig}: ${(err as Error).message}`,
    );
  }
  const own = kubeconfigAccess(text, kubeconfig);
  if (own) return own;
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc;
}

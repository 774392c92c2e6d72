import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type RequestOptions,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type AgentOptions } from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import type { KubeAccess } from './access.ts';
import { BaseError } from '../errors.ts';

/**
 * A deliberately small REST client for the Kubernetes API over node:http(s), taking credentials and
 * TLS from a KubeAccess (src/kube/access.ts; `applyToHTTPSOptions`, evaluated per request so
 * rotating tokens and exec plugins keep working). Reasons for not using the generated clients here
 * (docs/adr/0002-controller-runtime.md): one error type keyed by HTTP status code for every call,
 * free choice of patch content types (apply-patch+yaml, merge-patch+json), MicroTime fields written
 * exactly as the server parses them, and watch streams whose lifetime the informer fully controls.
 */

/** The `Status` object the API server returns with errors (and inside watch ERROR events). */
export interface KubeStatus {
  kind?: 'Status';
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    retryAfterSeconds?: number;
    name?: string;
    kind?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
  };
}

/**
 * A watch whose response was cut before its end (a socket torn down mid-stream): the informer
 * treats it as any watch failure and watches again from its last resourceVersion.
 */
export class WatchInterruptedError extends BaseError<'WATCH_INTERRUPTED'> {}

/**
 * A non-2xx answer of the API server. Callers branch on `code` (the HTTP status: 404, 409, 410, 422,
 * 429…) and may refine with `reason` (`AlreadyExists` vs `Conflict`, both 409); never on the message.
 */
export class KubeApiError extends BaseError<number> {
  readonly reason: string;
  readonly status: KubeStatus | undefined;
  /** From `Retry-After` or `details.retryAfterSeconds` (429, 503, "storage is (re)initializing"). */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: number, status: KubeStatus | undefined, retryAfterSeconds?: number) {
    super(code, status?.message ?? `HTTP ${code}`);
    this.reason = status?.reason ?? '';
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds ?? status?.details?.retryAfterSeconds;
  }
}

const hasCode = (err: unknown, code: number): boolean => err instanceof KubeApiError && err.code === code;
export const isNotFound = (err: unknown): boolean => hasCode(err, 404);
/** 409 of any kind: optimistic-concurrency conflict, SSA field conflict or AlreadyExists. */
export const isConflict = (err: unknown): boolean => hasCode(err, 409);
export const isAlreadyExists = (err: unknown): boolean =>
  err instanceof KubeApiError && err.code === 409 && err.reason === 'AlreadyExists';
/**
 * The object would outgrow what the API server stores (etcd's request limit, 1.5 MiB by default, or
 * the API server's own body limit): no retry makes it fit.
 */
export const isTooLarge = (err: unknown): boolean =>
  err instanceof KubeApiError &&
  (err.code === 413 || /request is too large|must have at most \d+ bytes/i.test(err.message));
/** 410 Gone / Expired: a resourceVersion or continue token is older than the server keeps. */
export const isGone = (err: unknown): boolean => hasCode(err, 410);

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Query;
  /** Serialised as JSON (JSON is valid YAML, so this also serves `application/apply-patch+yaml`). */
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Per-request timeout; defaults to the client's. */
  timeoutMs?: number;
}

export interface StreamSpec {
  path: string;
  query?: Query;
  /** Ends the stream; the returned promise then rejects with the signal's reason. */
  signal: AbortSignal;
}

export interface KubeClient {
  request<T>(spec: RequestSpec): Promise<T>;
  /**
   * Opens a streaming GET (a watch) and calls `onObject` for every newline-delimited JSON value.
   * Resolves when the server ends the stream cleanly, rejects on a non-200 answer (KubeApiError),
   * a transport error, malformed JSON or abort. There is no inactivity timeout here on purpose:
   * the informer's watchdog owns that decision.
   */
  stream(spec: StreamSpec, onObject: (value: unknown) => void): Promise<void>;
}

export interface KubeClientOptions {
  /** Default timeout of non-streaming requests. */
  timeoutMs?: number;
  userAgent?: string;
}

/**
 * How long an idle keep-alive connection is kept. Below kube-apiserver's idle timeout (90 s, Go's
 * `http.Server.IdleTimeout` as the API server sets it), so the client closes first and never sends a
 * request on a connection the server is closing.
 */
const IDLE_SOCKET_MS = 30_000;

/** The TLS material of the agent options that decides which connections may be shared. */
const TLS_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

/**
 * One keep-alive agent per client. `applyToHTTPSOptions` sets TLS options and either no agent (the
 * service's own KubeAccess) or one without keep-alive (client-node 2.x caches one `https.Agent` per
 * cluster and user, created with its defaults), so every request would open a new TCP and TLS
 * connection: measured at 69 against 89 server-side applies/s on the stack's API server. This
 * agent is made from the same TLS options and made again when they change (a rotated client
 * certificate), so credentials stay the KubeAccess's. A proxy agent from a client-node KubeConfig
 * (`proxy-url`) is left in place.
 */
function keepAliveAgents(): (opts: RequestOptions & AgentOptions, protocol: string) => void {
  let current: { tls: unknown[]; agent: HttpAgent } | undefined;
  return (opts, protocol) => {
    const given = opts.agent;
    // Proxy agents subclass http(s).Agent: those stay.
    if (given instanceof HttpAgent && given.constructor !== HttpAgent && given.constructor !== HttpsAgent)
      return;
    const tls = TLS_KEYS.map((k) => opts[k]);
    const same = current !== undefined && tls.every((v, i) => sameValue(v, current!.tls[i]));
    if (!same) {
      const options = { keepAlive: true, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const };
      const agent =
        protocol === 'http:'
          ? new HttpAgent(options)
          : new HttpsAgent({ ...options, ...Object.fromEntries(TLS_KEYS.map((k, i) => [k, tls[i]])) });
      // Connections of the previous material finish their requests, then close.
      const previous = current?.agent;
      current = { tls, agent };
      if (previous) setTimeout(() => previous.destroy(), IDLE_SOCKET_MS).unref();
    }
    opts.agent = current!.agent;
  };
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  return a === b;
}

function buildUrl(server: string, path: string, query: Query | undefined): URL {
  // Concatenate rather than resolve: a server URL may carry a path prefix (API proxies).
  const url = new URL(server.replace(/\/$/, '') + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

async function readBody(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function toError(code: number, text: string, retryAfter: string | undefined): KubeApiError {
  let status: KubeStatus | undefined;
  try {
    const parsed = JSON.parse(text) as KubeStatus;
    if (parsed && typeof parsed === 'object') status = parsed;
  } catch {
    status = { message: text.slice(0, 512) || `HTTP ${code}` };
  }
  const ra = retryAfter !== undefined && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  return new KubeApiError(code, status, ra);
}

export function kubeClient(kc: KubeAccess, options: KubeClientOptions = {}): KubeClient {
  const defaultTimeout = options.timeoutMs ?? 30_000;
  const userAgent = options.userAgent ?? 'aibom-vault-controller';
  const useKeepAlive = keepAliveAgents();

  async function open(
    method: string,
    url: URL,
    headers: Record<string, string>,
    signal: AbortSignal,
    body: string | undefined,
  ): Promise<IncomingMessage> {
    const opts: RequestOptions & AgentOptions = { method };
    await kc.applyToHTTPSOptions(opts); // sets ca/cert/key, an agent and the Authorization header
    useKeepAlive(opts, url.protocol);
    const all: Record<string, string> = {
      ...(opts.headers as Record<string, string> | undefined),
      'user-agent': userAgent,
      accept: 'application/json',
      ...headers,
    };
    if (body !== undefined) all['content-length'] = String(Buffer.byteLength(body));
    opts.headers = all;
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      // `signal` destroys the socket: that is what makes abort (and the watchdog) real.
      const req = send(url, { ...opts, signal }, resolve);
      req.on('error', (err) => reject(signal.aborted ? (signal.reason as Error) : err));
      req.end(body);
    });
  }

  return {
    async request<T>(spec: RequestSpec): Promise<T> {
      const timeout = AbortSignal.timeout(Math.max(1, Math.ceil(spec.timeoutMs ?? defaultTimeout)));
      const signal = spec.signal ? AbortSignal.any([spec.signal, timeout]) : timeout;
      const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
      const headers: Record<string, string> = {};
      if (body !== undefined) headers['content-type'] = spec.contentType ?? 'application/json';
      const res = await open(
        spec.method,
        buildUrl(kc.getCurrentCluster()?.server ?? '', spec.path, spec.query),
        headers,
        signal,
        body,
      );
      const text = await readBody(res).catch((err: unknown) => {
        throw signal.aborted ? (signal.reason as Error) : err;
      });
      const code = res.statusCode ?? 0;
      if (code < 200 || code >= 300) throw toError(code, text, res.headers['retry-after']);
      return (text === '' ? undefined : JSON.parse(text)) as T;
    },

    async stream(spec: StreamSpec, onObject: (value: unknown) => void): Promise<void> {
      const url = buildUrl(kc.getCurrentCluster()?.server ?? '', spec.path, spec.query);
      const res = await open('GET', url, {}, spec.signal, undefined);
      const code = res.statusCode ?? 0;
      if (code !== 200) throw toError(code, await readBody(res), res.headers['retry-after']);
      let buffered = '';
      // One decoder for the whole stream: a character's UTF-8 bytes may arrive in two chunks, and
      // decoding each chunk on its own would turn them into U+FFFD (corrupting names in the cache).
      const decoder = new StringDecoder('utf8');
      try {
        for await (const chunk of res) {
          buffered += decoder.write(chunk as Buffer);
          let nl: number;
          while ((nl = buffered.indexOf('\n')) >= 0) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (line !== '') onObject(JSON.parse(line));
          }
        }
      } catch (err) {
        res.destroy();
        throw spec.signal.aborted ? (spec.signal.reason as Error) : err;
      }
      // A socket torn down mid-stream may end the iterator without an error: treat as abnormal.
      if (!res.complete)
        throw new WatchInterruptedError(
          'WATCH_INTERRUPTED',
          'watch stream ended before the response was complete',
        );
      buffered += decoder.end();
      if (buffered.trim() !== '') onObject(JSON.parse(buffered));
    },
  };
}

/** Where a resource lives: enough to build its REST paths. `group` is '' for the core API. */
export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export function apiVersionOf(t: ResourceType): string {
  return t.group === '' ? t.version : `${t.group}/${t.version}`;
}

/** `/apis/g/v/namespaces/ns/plural/name/sub`; omit `namespace` for all namespaces or cluster scope. */
export function resourcePath(
  t: ResourceType,
  at: { namespace?: string | undefined; name?: string | undefined; subresource?: string | undefined } = {},
): string {
  const base = t.group === '' ? `/api/${t.version}` : `/apis/${t.group}/${t.version}`;
  const ns = at.namespace ? `/namespaces/${encodeURIComponent(at.namespace)}` : '';
  const name = at.name ? `/${encodeURIComponent(at.name)}` : '';
  const sub = at.name && at.subresource ? `/${at.subresource}` : '';
  return `${base}${ns}/${t.plural}${name}${sub}`;
}

/** Kubernetes `MicroTime` wire format (`…T15:04:05.000000Z`); the server rejects plain ISO millis. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

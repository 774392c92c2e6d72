import { StreamReader } from '../attest/index.ts';
import { visibleText } from '../visible.ts';
import { CliError } from './command.ts';
import type { RunRef } from './options.ts';

/** Problem+json from the API, surfaced with its stable code. */
export class ApiError extends CliError {
  readonly status: number;
  /** The problem's stable `code` (docs/api.md); HTTP_ERROR for an answer that is not a problem. */
  readonly problemCode: string;
  constructor(status: number, problemCode: string, detail: string, message?: string) {
    super(message ?? `HTTP ${status} ${problemCode}: ${detail}`, 1, { code: 'API' });
    this.status = status;
    this.problemCode = problemCode;
  }
}

export interface ClientOptions {
  readonly baseUrl: string;
  readonly token?: string;
  readonly fetch?: typeof fetch;
}

/**
 * Text from the server made fit for one line of the CLI's error output: control characters
 * (newlines of an HTML error page, a hostile server's terminal escapes) become spaces, and the
 * result is cut to `max` characters.
 */
export function oneLine(text: string, max = 300): string {
  const flat = visibleText(text.replace(/[\p{Cc}\s]+/gu, ' ').trim());
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** The media type of a Content-Type header, lower-case, without parameters ('' when absent). */
function mediaTypeOf(contentType: string | null): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * Whether an answer of `mediaType` is one the request's Accept named: `*\/*` takes anything;
 * `application/json` takes JSON and any `+json` type (RFC 6839).
 */
function acceptable(mediaType: string, accept: string): boolean {
  return accept.split(',').some((part) => {
    const wanted = mediaTypeOf(part);
    if (wanted === '*/*' || wanted === mediaType) return true;
    return wanted === 'application/json' && mediaType.endsWith('+json');
  });
}

/**
 * Thin typed client of the /v1 API; the CLI's commands are built on it. It checks that answers
 * come from the service API: an error that is not problem+json, a success in a media type the
 * request did not accept, or JSON that is not an object fail with one line saying so, not with a
 * parser's message or a half-written file (a SERVICE_API_URL that names another server: the
 * kube-apiserver, a proxy's error page).
 */
export class ApiClient {
  private readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/$/, '');
    this.token = opts.token;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  /** The URL of an API path, as errors name it. */
  urlOf(path: string): string {
    return `${this.baseUrl}${path}`;
  }

  /** Where an answer that is not the API's may have come from: said in every such error. */
  private notTheApi(url: string, what: string): CliError {
    return new CliError(`${url} answered ${what}: is SERVICE_API_URL (${this.baseUrl}) the service API?`);
  }

  async request(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    accept = 'application/json',
  ): Promise<Response> {
    const url = this.urlOf(path);
    const headers: Record<string, string> = { accept };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      // undici says only "fetch failed"; the reason (ECONNREFUSED, a certificate error) is its cause.
      const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
      const why = [cause?.code, cause?.message].filter((v) => typeof v === 'string').join(': ');
      throw new CliError(
        `cannot reach ${this.baseUrl}: ${oneLine((err as Error).message)}${why === '' ? '' : ` (${oneLine(why)})`}`,
      );
    }
    const mediaType = mediaTypeOf(res.headers.get('content-type'));
    if (!res.ok) throw await this.problemOf(res, url, mediaType);
    if (!acceptable(mediaType, accept)) {
      await res.body?.cancel();
      throw this.notTheApi(url, `HTTP ${res.status} ${mediaType || 'without a content type'}, not ${accept}`);
    }
    return res;
  }

  /** The ApiError of an answer that is not 2xx: the problem's code and detail, or a line on what came. */
  private async problemOf(res: Response, url: string, mediaType: string): Promise<ApiError> {
    const text = await res.text().catch(() => '');
    if (mediaType === 'application/problem+json' || mediaType === 'application/json') {
      try {
        const p = JSON.parse(text) as { code?: unknown; detail?: unknown; title?: unknown };
        const detail =
          typeof p.detail === 'string' ? p.detail : typeof p.title === 'string' ? p.title : undefined;
        if (typeof p.code === 'string' && detail !== undefined) {
          return new ApiError(res.status, oneLine(p.code, 80), oneLine(detail));
        }
      } catch {
        /* not JSON after all: said below */
      }
    }
    const excerpt = oneLine(text, 200);
    return new ApiError(
      res.status,
      'HTTP_ERROR',
      excerpt,
      `HTTP ${res.status} from ${url}, not a problem of the service API (${mediaType || 'no content type'}` +
        `${excerpt === '' ? '' : `: ${excerpt}`}): is SERVICE_API_URL (${this.baseUrl}) the service API?`,
    );
  }

  /** The body of an accepted answer, read whole; a connection that breaks off says so. */
  async bytes(method: 'GET' | 'POST', path: string, accept?: string, body?: unknown): Promise<Buffer> {
    const res = await this.request(method, path, body, accept);
    try {
      return Buffer.from(await res.arrayBuffer());
    } catch (err) {
      throw new CliError(`the answer from ${this.urlOf(path)} broke off: ${oneLine((err as Error).message)}`);
    }
  }

  /** A JSON answer; every /v1 JSON body is an object, so anything else is not the API's. */
  async json<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const text = (await this.bytes(method, path, 'application/json', body)).toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw this.notTheApi(this.urlOf(path), 'a body that is not JSON');
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw this.notTheApi(this.urlOf(path), 'JSON that is not an object');
    }
    return value as T;
  }

  /** A JSON answer that must hold `field` as an array (a page's items): checked, not assumed. */
  async page<T extends object>(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    field: string,
  ): Promise<T> {
    const value = await this.json<Record<string, unknown>>(method, path, body);
    if (!Array.isArray(value[field])) {
      throw this.notTheApi(this.urlOf(path), `JSON without its "${field}" list`);
    }
    return value as T;
  }

  getAttestation(id: string): Promise<Record<string, unknown>> {
    return this.json('GET', `/v1/attestations/${encodeURIComponent(id)}`);
  }

  getRun(id: string): Promise<Record<string, unknown>> {
    return this.json('GET', `/v1/runs/${encodeURIComponent(id)}`);
  }

  /**
   * The run a reference names: by id, or by namespace and name (the most recent run of that name
   * the vault holds), with the same authorisation either way.
   */
  async resolveRun(ref: RunRef): Promise<Record<string, unknown> & { id: string }> {
    const path =
      'id' in ref
        ? `/v1/runs/${encodeURIComponent(ref.id)}`
        : `/v1/namespaces/${encodeURIComponent(ref.namespace)}/runs/${encodeURIComponent(ref.name)}`;
    const run = await this.json<Record<string, unknown>>('GET', path);
    if (typeof run.id !== 'string') throw this.notTheApi(this.urlOf(path), 'JSON that is not a run');
    return run as Record<string, unknown> & { id: string };
  }

  /** The run id a reference names: a UUID as given, NAMESPACE/NAME through the API (same authorisation). */
  async runId(ref: RunRef): Promise<string> {
    return 'id' in ref ? ref.id : (await this.resolveRun(ref)).id;
  }

  /** One page of `POST /v1/attestations/query`. */
  queryPage(filter: Record<string, unknown>): Promise<{
    items: Record<string, unknown>[];
    next_cursor: string | null;
    excluded_namespace_count: number;
  }> {
    return this.page('POST', '/v1/attestations/query', filter, 'items');
  }

  /**
   * Every record matching `filter`, streamed as NDJSON (flat memory on both ends). Throws when the
   * stream ends without its trailer or the trailer does not match the lines (a cut stream).
   */
  async *queryAll(filter: Record<string, unknown>): AsyncGenerator<Record<string, unknown>> {
    const res = await this.request('POST', '/v1/attestations/query', filter, 'application/x-ndjson');
    const reader = new StreamReader();
    const decoder = new TextDecoder();
    let buffered = '';
    const line = (text: string): Record<string, unknown> | undefined => {
      try {
        return reader.line(text) as Record<string, unknown> | undefined;
      } catch (err) {
        throw new CliError(`the query stream is malformed: ${(err as Error).message}`);
      }
    };
    try {
      for await (const chunk of res.body ?? []) {
        buffered += decoder.decode(chunk as Uint8Array, { stream: true });
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const record = line(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          if (record !== undefined) yield record;
        }
      }
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw new CliError(`the query stream broke off: ${(err as Error).message}`);
    }
    if (buffered !== '') {
      const record = line(buffered);
      if (record !== undefined) yield record;
    }
    try {
      reader.end();
    } catch (err) {
      throw new CliError(`the query stream is incomplete: ${(err as Error).message}`);
    }
  }
}

import { StreamReader } from '../attest/index.ts';
import { CliError } from './command.ts';
import type { RunRef } from './options.ts';

/** Problem+json from the API, surfaced with its stable code. */
export class ApiError extends CliError {
  readonly status: number;
  /** The problem's stable `code` (docs/api.md). */
  readonly problemCode: string;
  constructor(status: number, problemCode: string, detail: string) {
    super(`HTTP ${status} ${problemCode}: ${detail}`, 1, { code: 'API' });
    this.status = status;
    this.problemCode = problemCode;
  }
}

export interface ClientOptions {
  readonly baseUrl: string;
  readonly token?: string;
  readonly fetch?: typeof fetch;
}

/** Thin typed client of the /v1 API; the CLI's commands are built on it. */
export class ApiClient {
  private readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/$/, '');
    this.token = opts.token;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  async request(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    accept = 'application/json',
  ): Promise<Response> {
    const headers: Record<string, string> = { accept };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await this.fetchImpl(`${this.baseUrl}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      throw new CliError(`cannot reach ${this.baseUrl}: ${(err as Error).message}`);
    }
    if (!res.ok) {
      const text = await res.text();
      let code = 'HTTP_ERROR';
      let detail = text.slice(0, 500);
      try {
        const p = JSON.parse(text) as { code?: string; detail?: string; title?: string };
        code = p.code ?? code;
        detail = p.detail ?? p.title ?? detail;
      } catch {
        /* not problem+json: keep the raw text */
      }
      throw new ApiError(res.status, code, detail);
    }
    return res;
  }

  async json<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    return (await (await this.request(method, path, body)).json()) as T;
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
  resolveRun(ref: RunRef): Promise<Record<string, unknown> & { id: string }> {
    return this.json(
      'GET',
      'id' in ref
        ? `/v1/runs/${encodeURIComponent(ref.id)}`
        : `/v1/namespaces/${encodeURIComponent(ref.namespace)}/runs/${encodeURIComponent(ref.name)}`,
    );
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
    return this.json('POST', '/v1/attestations/query', filter);
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

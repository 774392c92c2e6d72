import { WitnessError } from './errors.ts';

/**
 * The c2sp.org/tlog-witness wire client: `POST <submission prefix>/add-checkpoint` with
 *
 *   old <size>\n<base64 consistency proof hash>\n…\n\n<signed checkpoint>
 *
 * and the answer as data: 200 with cosignature lines, 409 with the witness's size
 * (`text/x.tlog.size`), or the refusal status (400, 403, 404, 422). It knows HTTP only; what a 409
 * or a 422 means for the log is the domain's (push.ts). Network failures, timeouts and 5xx throw
 * WITNESS_UNAVAILABLE.
 */

export type AddCheckpointAnswer =
  | { readonly status: 200; readonly lines: readonly string[] }
  | { readonly status: 409; readonly size: number }
  /** A refusal: 400, 403, 404, 422 (or any other non-5xx status), with the start of its body. */
  | { readonly status: number; readonly body: string };

export interface AddCheckpointRequest {
  readonly oldSize: number;
  readonly proof: readonly Buffer[];
  /** The signed checkpoint note. */
  readonly checkpoint: string;
}

export interface WitnessClient {
  readonly url: string;
  addCheckpoint(req: AddCheckpointRequest, signal?: AbortSignal): Promise<AddCheckpointAnswer>;
}

/** The spec's bound on consistency proof lines. */
export const MAX_PROOF_LINES = 63;
/** Longest answer body read (cosignature lines are ~100 bytes each). */
const MAX_ANSWER_BYTES = 64 * 1024;

export function addCheckpointBody(req: AddCheckpointRequest): string {
  if (!Number.isSafeInteger(req.oldSize) || req.oldSize < 0) throw new RangeError(`old size ${req.oldSize}`);
  if (req.proof.length > MAX_PROOF_LINES) {
    throw new RangeError(`a consistency proof of ${req.proof.length} hashes exceeds ${MAX_PROOF_LINES}`);
  }
  return [`old ${req.oldSize}`, ...req.proof.map((h) => h.toString('base64')), '', req.checkpoint].join('\n');
}

async function readBounded(res: Response): Promise<string> {
  const reader = (res.body as ReadableStream<Uint8Array> | null)?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > MAX_ANSWER_BYTES) {
      await reader.cancel();
      throw new WitnessError('WITNESS_PROTOCOL', `the witness answered more than ${MAX_ANSWER_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function createWitnessClient(options: {
  /** The submission prefix (add-checkpoint is appended). */
  readonly url: string;
  /** Deadline of one request, from sending it to the last byte of the answer. */
  readonly timeoutMs: number;
  readonly fetch?: typeof fetch;
}): WitnessClient {
  const base = options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  return {
    url: base,
    async addCheckpoint(req, signal) {
      const deadline = AbortSignal.timeout(options.timeoutMs);
      const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
      let res: Response;
      let body: string;
      try {
        res = await doFetch(`${base}/add-checkpoint`, {
          method: 'POST',
          body: addCheckpointBody(req),
          headers: { 'content-type': 'text/plain; charset=utf-8' },
          signal: combined,
        });
        body = await readBounded(res);
      } catch (err) {
        if (err instanceof WitnessError) throw err;
        const why = deadline.aborted ? `no answer within ${options.timeoutMs} ms` : (err as Error).message;
        throw new WitnessError('WITNESS_UNAVAILABLE', `witness ${base}: ${why}`, { cause: err });
      }
      if (res.status >= 500) {
        throw new WitnessError('WITNESS_UNAVAILABLE', `witness ${base} answered ${res.status}`);
      }
      if (res.status === 200) {
        const lines = body.split('\n');
        if (lines.pop() !== '' || lines.length === 0 || lines.some((l) => !l.startsWith('\u2014 '))) {
          throw new WitnessError(
            'WITNESS_PROTOCOL',
            `witness ${base}: a 200 whose body is not signature lines`,
          );
        }
        return { status: 200, lines: lines.map((l) => `${l}\n`) };
      }
      if (res.status === 409) {
        const type = res.headers.get('content-type') ?? '';
        const m = /^(0|[1-9][0-9]{0,15})\n$/.exec(body);
        if (!type.startsWith('text/x.tlog.size') || m === null) {
          throw new WitnessError(
            'WITNESS_PROTOCOL',
            `witness ${base}: a 409 without a text/x.tlog.size body`,
          );
        }
        return { status: 409, size: Number(m[1]) };
      }
      return { status: res.status, body: body.slice(0, 1024).trim() };
    },
  };
}

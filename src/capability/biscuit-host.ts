import { Worker } from 'node:worker_threads';
import type { BiscuitRequest, BiscuitResults } from './biscuit-wasm.ts';
import type { BiscuitReply } from './biscuit-worker.ts';
import { CapabilityError, type CapabilityErrorCode } from './errors.ts';

/**
 * Runs Biscuit operations in a worker thread that is replaced after `callsPerWorker` calls and
 * stopped after `idleMs` without one.
 *
 * Why: biscuit-wasm 0.6.0's linear memory grows by about 28 KB with every token minted, even with
 * every wasm object freed (src/capability/wasm-held.ts), and a wasm memory never shrinks. In the
 * controller that was most of what grew per recorded Run (docs/bench.md, issue 29). A terminated
 * worker takes its isolate and its wasm memory with it, so the controller holds at most one
 * worker's growth, and none at rest.
 *
 * Invariants:
 * - a worker takes at most `callsPerWorker` requests; the one that reaches it is "retiring": later
 *   calls start a new worker, and the retiring one is terminated once its last answer is in;
 * - a worker with no request in flight never keeps the process alive (unref), so a CLI exits when
 *   its work is done;
 * - a worker that dies rejects what it had in flight with BISCUIT_UNAVAILABLE, and the next call
 *   starts another.
 */
export interface BiscuitHostOptions {
  /** Requests one worker takes before it is replaced. */
  readonly callsPerWorker?: number;
  /** A worker without a request for this long is stopped. */
  readonly idleMs?: number;
}

/** About 14 MiB of wasm growth per worker at 28 KB a mint (docs/bench.md, issue 29, sixth round). */
export const DEFAULT_CALLS_PER_WORKER = 500;
export const DEFAULT_IDLE_MS = 10_000;

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** One worker and what it has in flight. */
interface Slot {
  readonly worker: Worker;
  readonly pending: Map<number, Pending>;
  calls: number;
  idle: NodeJS.Timeout | undefined;
}

/** The worker's module: the .ts source under Node's type stripping, the .js the image compiles. */
function workerUrl(): URL {
  return new URL(
    import.meta.url.endsWith('.ts') ? './biscuit-worker.ts' : './biscuit-worker.js',
    import.meta.url,
  );
}

export class BiscuitHost {
  readonly #callsPerWorker: number;
  readonly #idleMs: number;
  #current: Slot | undefined;
  /** Every worker not yet stopped: the current one and any retiring. */
  readonly #live = new Set<Slot>();
  #nextId = 0;
  #started = 0;

  constructor(options: BiscuitHostOptions = {}) {
    this.#callsPerWorker = Math.max(1, options.callsPerWorker ?? DEFAULT_CALLS_PER_WORKER);
    this.#idleMs = options.idleMs ?? DEFAULT_IDLE_MS;
  }

  /** Workers started so far (tests and the bench read it). */
  get workersStarted(): number {
    return this.#started;
  }

  /** Whether a worker takes new calls now (an idle one stops; a retiring one takes none). */
  get running(): boolean {
    return this.#current !== undefined;
  }

  /** Workers not yet stopped, retiring ones included. */
  get live(): number {
    return this.#live.size;
  }

  call<R extends BiscuitRequest>(request: R): Promise<BiscuitResults[R['op']]> {
    const slot = this.#slot();
    slot.calls += 1;
    // Retiring: no longer the current worker, stopped once its last answer is in (#answer).
    if (slot.calls >= this.#callsPerWorker) this.#current = undefined;
    const id = this.#nextId++;
    if (slot.idle !== undefined) clearTimeout(slot.idle);
    slot.idle = undefined;
    if (slot.pending.size === 0) slot.worker.ref();
    return new Promise((resolve, reject) => {
      slot.pending.set(id, { resolve, reject });
      slot.worker.postMessage({ id, request });
    });
  }

  /** Stops every worker; calls in flight are rejected. */
  async close(): Promise<void> {
    await Promise.all([...this.#live].map((slot) => this.#stop(slot)));
  }

  #slot(): Slot {
    if (this.#current !== undefined) return this.#current;
    // The worker shares the process's stdout and stderr; it prints nothing on stdout (a CLI's
    // output, `service-ctl verify --json`): biscuit-worker.ts mutes console.log. Taking its stdout
    // as a stream instead would keep the process alive while the worker idles. No inherited Node
    // options: `--input-type` or `--eval` of the process would stop the worker from loading its
    // file (V8 flags such as the heap's are process-wide and apply anyway).
    const worker = new Worker(workerUrl(), { execArgv: [] });
    const slot: Slot = { worker, pending: new Map(), calls: 0, idle: undefined };
    this.#started += 1;
    this.#live.add(slot);
    worker.on('message', (reply: BiscuitReply) => this.#answer(slot, reply));
    worker.on('error', (err) => this.#fail(slot, err));
    worker.on('exit', (code) => this.#fail(slot, new Error(`exited with code ${code}`)));
    this.#current = slot;
    return slot;
  }

  #answer(slot: Slot, reply: BiscuitReply): void {
    const pending = slot.pending.get(reply.id);
    if (pending === undefined) return;
    slot.pending.delete(reply.id);
    if (reply.ok) pending.resolve(reply.value);
    else if (reply.code !== undefined)
      pending.reject(new CapabilityError(reply.code as CapabilityErrorCode, reply.message));
    else pending.reject(reply.thrown ?? new Error(reply.message));
    if (slot.pending.size > 0) return;
    if (slot !== this.#current) {
      void this.#stop(slot);
      return;
    }
    slot.worker.unref();
    slot.idle = setTimeout(() => void this.#stop(slot), this.#idleMs);
    slot.idle.unref();
  }

  #fail(slot: Slot, err: unknown): void {
    this.#drop(
      slot,
      new CapabilityError('BISCUIT_UNAVAILABLE', `the Biscuit worker stopped: ${String(err)}`, {
        cause: err,
      }),
    );
  }

  async #stop(slot: Slot): Promise<void> {
    // Dropped first: its 'exit' is then expected, not a failure to report.
    this.#drop(slot, new CapabilityError('BISCUIT_UNAVAILABLE', 'the Biscuit worker was stopped'));
    await slot.worker.terminate();
  }

  /** Forgets a worker, failing what it had in flight with `failure` (once: later calls do nothing). */
  #drop(slot: Slot, failure: CapabilityError): void {
    if (!this.#live.delete(slot)) return;
    if (this.#current === slot) this.#current = undefined;
    if (slot.idle !== undefined) clearTimeout(slot.idle);
    for (const p of slot.pending.values()) p.reject(failure);
    slot.pending.clear();
  }
}

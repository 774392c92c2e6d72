import { parentPort } from 'node:worker_threads';
import { InvariantError } from '../errors.ts';
import { quietWasmImportWarning } from './wasm-warning.ts';
import { perform, type BiscuitRequest } from './biscuit-wasm.ts';
import { CapabilityError } from './errors.ts';

/**
 * The Biscuit worker's entry point (biscuit-host.ts starts it): one biscuit-wasm instance, whose
 * linear memory goes with the thread when the host replaces it. Requests are answered in the order
 * they finish; each carries the id the host matches the answer by.
 */

/** An answer; `error` is a CapabilityError's code and message, or anything else thrown, cloned. */
export type BiscuitReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | {
      readonly id: number;
      readonly ok: false;
      readonly code?: string;
      readonly message: string;
      readonly thrown?: unknown;
    };

const port = parentPort;
if (port === null) throw new InvariantError('biscuit-worker.ts runs as a worker thread only');
// Node prints an ExperimentalWarning for the .wasm import in this thread too.
quietWasmImportWarning();
// This thread writes to the process's stdout, which is a CLI's output; the library prints
// "biscuit-wasm loading" there when it loads. Nothing of this thread belongs on it.
// eslint-disable-next-line no-console -- see above
console.log = () => {};

port.on('message', (message: { id: number; request: BiscuitRequest }) => {
  perform(message.request).then(
    (value) => port.postMessage({ id: message.id, ok: true, value } satisfies BiscuitReply),
    (err: unknown) => port.postMessage(replyOf(message.id, err)),
  );
});

function replyOf(id: number, err: unknown): BiscuitReply {
  if (err instanceof CapabilityError) return { id, ok: false, code: err.code, message: err.message };
  // biscuit-wasm throws plain objects (its Rust error, serialised); those clone as they are.
  try {
    return { id, ok: false, message: String(err), thrown: structuredClone(err) };
  } catch {
    return { id, ok: false, message: String(err) };
  }
}

/**
 * Node 24 prints a two-line `ExperimentalWarning: Importing WebAssembly module instances is an
 * experimental feature` the first time the Biscuit verifier's .wasm is imported as an ES module
 * (src/capability/biscuit-wasm.ts, in the Biscuit worker and wherever else it is loaded): expected,
 * and noise on the stderr of every `service-ctl verify`.
 * Exactly that warning is dropped; every other still goes to Node's own handler(s), which print
 * it as before (`--no-warnings` and friends keep working: they act inside those handlers).
 */
const WASM_IMPORT = 'Importing WebAssembly module instances';

let installed = false;

/** Installs the filter once per process (main() may run many times in one test process). */
export function quietWasmImportWarning(): void {
  if (installed) return;
  installed = true;
  const handlers = process.listeners('warning');
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (warning.name === 'ExperimentalWarning' && warning.message.startsWith(WASM_IMPORT)) return;
    for (const handler of handlers) handler.call(process, warning);
  });
}

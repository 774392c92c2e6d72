/** A wasm-bindgen object: its memory is in the wasm instance's linear memory until `free()`. */
interface WasmObject {
  free(): void;
}

/**
 * The wasm objects one call makes, freed when it ends. Left to wasm-bindgen's FinalizationRegistry
 * they are freed only once the garbage collector has collected their wrappers and run the
 * finalizers, and the wasm linear memory they held meanwhile never shrinks. Measured over 3,000
 * mints and verifications in one process: external memory +270 MiB with the objects left to
 * finalization, +174 MiB with each freed here. The rest is biscuit-wasm 0.6.0's own: its memory
 * grows even when every object is freed (about 2.8 KB per `addCode` of ten facts), which no caller
 * can free; biscuit-host.ts bounds it by replacing the worker thread the instance lives in
 * (docs/bench.md "Issue 29, fifth round" and "sixth round").
 *
 * Objects a call consumed (`BiscuitBuilder.build`, `AuthorizerBuilder.buildAuthenticated`) have a
 * null pointer already and are skipped.
 */
export class Held {
  readonly #objects: WasmObject[] = [];

  keep<T extends WasmObject>(o: T): T {
    this.#objects.push(o);
    return o;
  }

  free(): void {
    for (const o of this.#objects.splice(0).reverse()) {
      if ((o as unknown as { __wbg_ptr?: number }).__wbg_ptr !== 0) o.free();
    }
  }
}

/** Runs `fn` with a Held whose objects are freed when it returns or throws. */
export function holding<T>(fn: (held: Held) => T): T {
  const held = new Held();
  try {
    return fn(held);
  } finally {
    held.free();
  }
}

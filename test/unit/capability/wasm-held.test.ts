/**
 * Held (src/capability/wasm-held.ts) frees every wasm object a call made, when it returns and when
 * it throws, last made first, and skips objects a wasm call already consumed (a null pointer:
 * freeing one would hand wasm a null pointer). Checked with stand-ins that record their frees,
 * and with biscuit-wasm itself: a minted token's builder and key are freed, not left to the GC.
 */
import { describe, expect, it } from 'vitest';
import { holding } from '../../../src/capability/wasm-held.ts';
import { loadBiscuit } from '../../../src/capability/biscuit.ts';

class Fake {
  __wbg_ptr: number;
  readonly name: string;
  readonly freed: string[];
  constructor(name: string, freed: string[], ptr = 8) {
    this.name = name;
    this.freed = freed;
    this.__wbg_ptr = ptr;
  }
  free(): void {
    if (this.__wbg_ptr === 0) throw new Error(`${this.name}: freed twice or after being consumed`);
    this.freed.push(this.name);
    this.__wbg_ptr = 0;
  }
}

describe('holding', () => {
  it('frees what the call kept, last first, and returns its value', () => {
    const freed: string[] = [];
    const out = holding((h) => {
      h.keep(new Fake('a', freed));
      h.keep(new Fake('b', freed));
      return 42;
    });
    expect(out).toBe(42);
    expect(freed).toEqual(['b', 'a']);
  });

  it('frees them when the call throws, and the error goes through', () => {
    const freed: string[] = [];
    expect(() =>
      holding((h) => {
        h.keep(new Fake('a', freed));
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(freed).toEqual(['a']);
  });

  it('skips an object a wasm call consumed', () => {
    const freed: string[] = [];
    holding((h) => {
      const consumed = h.keep(new Fake('builder', freed));
      consumed.__wbg_ptr = 0; // what BiscuitBuilder.build does to its builder
      h.keep(new Fake('token', freed));
    });
    expect(freed).toEqual(['token']);
  });

  it('frees real biscuit-wasm objects: a consumed builder is skipped, the key and token are freed', async () => {
    const b = await loadBiscuit();
    const seen: { builder?: unknown; key?: unknown; token?: unknown } = {};
    const encoded = holding((h) => {
      const key = h.keep(b.PrivateKey.fromBytes(Buffer.alloc(32, 7), b.SignatureAlgorithm.Ed25519));
      const builder = h.keep(b.Biscuit.builder());
      builder.addCode('a(1);');
      const token = h.keep(builder.build(key));
      Object.assign(seen, { builder, key, token });
      return token.toBase64();
    });
    expect(encoded.length).toBeGreaterThan(0);
    const ptr = (o: unknown) => (o as { __wbg_ptr: number }).__wbg_ptr;
    expect([ptr(seen.builder), ptr(seen.key), ptr(seen.token)]).toEqual([0, 0, 0]);
  });
});

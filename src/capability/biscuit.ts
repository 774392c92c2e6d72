import { deriveSecret, type Signer } from '../signing/index.ts';
import { BiscuitHost } from './biscuit-host.ts';
import type { BiscuitClaims, VerifiedBiscuit } from './biscuit-wasm.ts';
import type { ChainLink } from './chain.ts';
import { CapabilityError } from './errors.ts';
import { covers } from './scope.ts';

/**
 * Biscuit v3 projection of a capability chain (docs/capabilities.md has the facts and a sample
 * authorizer). Minted with @biscuit-auth/biscuit-wasm (the Rust core), checked in the conformance
 * tests by the Java implementation, which shares none of its code. The wasm runs in a worker thread
 * that is replaced every few hundred calls (biscuit-host.ts says why); biscuit-wasm.ts has the
 * operations themselves.
 *
 * Root key: an Ed25519 key derived from the envelope signer (`deriveSecret`, info
 * {@link BISCUIT_ROOT_INFO}), not the signer's own key: Biscuit signs inside wasm, which cannot call
 * a Signer, and the Java implementation verifies Ed25519 roots only (the default signer is P-256).
 * Each namespace key therefore has its own Biscuit root; the capability attestation (signed by the
 * signer) records its public key, which is how a verifier holding the signer's key learns it.
 */

export const BISCUIT_ROOT_INFO = 'biscuit-root-ed25519/v1';

export { loadBiscuit, type BiscuitClaims, type VerifiedBiscuit } from './biscuit-wasm.ts';

/** The process's Biscuit worker (started on first use, never while idle). */
const host = new BiscuitHost();

/** Biscuit workers running in this process now, retiring ones included (the restart bench waits for 0). */
export function biscuitWorkers(): number {
  return host.live;
}

/**
 * The Biscuit root private key of a signer (32-byte Ed25519 seed), in a buffer of its own: a
 * view into a shared pool would send the whole pool into the worker.
 */
export function biscuitRootSeed(signer: Signer): Uint8Array {
  const seed = deriveSecret(signer, BISCUIT_ROOT_INFO);
  if (seed === undefined) {
    throw new CapabilityError(
      'BISCUIT_UNAVAILABLE',
      `signer ${signer.keyId} cannot derive a Biscuit root key (not a local key)`,
    );
  }
  return new Uint8Array(seed);
}

/** Root keys by signer: the recorder asks for one per batch, and a signer's never changes. */
const rootKeys = new WeakMap<Signer, Promise<string>>();

/** `ed25519/<hex>`: the Biscuit root public key of a signer, as Biscuit tooling prints it. */
export function biscuitRootKey(signer: Signer): Promise<string> {
  let key = rootKeys.get(signer);
  if (key === undefined) {
    key = host.call({ op: 'rootKey', seed: biscuitRootSeed(signer) });
    // A failure is not remembered: the next batch asks again.
    key.catch(() => rootKeys.delete(signer));
    rootKeys.set(signer, key);
  }
  return key;
}

/**
 * Mints the token: the authority block (root key) states the chain as the service recorded it;
 * one attenuation block per link restates that link and restricts the operations the token allows
 * to the link's scope. The authorizer trusts the authority block only (Biscuit's default scope),
 * so "approved by X for scope Y" is checked against facts the root signed.
 */
export function mintBiscuit(signer: Signer, claims: BiscuitClaims): Promise<{ token: string; id: string }> {
  return host.call({ op: 'mint', seed: biscuitRootSeed(signer), claims });
}

/**
 * Parses and verifies a token against one root public key (`ed25519/<hex>`), then reads its
 * authority facts. Throws TOKEN_MALFORMED (not a Biscuit), TOKEN_UNTRUSTED (signed by another
 * root or tampered: Biscuit cannot tell those apart, its signature chain just fails).
 */
export function readBiscuit(token: string, rootKey: string): Promise<VerifiedBiscuit> {
  return host.call({ op: 'read', token, rootKey });
}

/**
 * Runs an authorizer (Datalog source with `time`, `operation` facts and policies) against a token
 * verified under `rootKey`; returns the index of the matching allow policy or throws.
 */
export function authorizeBiscuit(token: string, rootKey: string, authorizer: string): Promise<number> {
  return host.call({ op: 'authorize', token, rootKey, authorizer });
}

/**
 * Whether the attenuation blocks only narrow. The first `minted` blocks are the service's, one per
 * link, each restating its link (`link($i, …)`): each within the scope of the one before (the
 * chain's own rule). Any holder may append more (Biscuit attenuation needs no key): a block that
 * restates a further link must stay within the scope of the link before it (else it claims a
 * delegation wider than its own grant); a block without a link fact only adds checks, which
 * Biscuit ANDs with every other check (and its facts are invisible to an authorizer trusting the
 * authority block, Biscuit's default), so it can only narrow.
 */
export function blocksNarrow(blocks: readonly (ChainLink | null)[], minted = blocks.length): boolean {
  let before: ChainLink | null = null;
  return blocks.every((l, i) => {
    if (l === null) return i >= minted;
    const narrows = before === null || covers(before.scope, l.scope);
    before = l;
    return narrows;
  });
}

import type { RetentionDeps } from '../../src/export/archive.ts';
import { exportKeys } from '../../src/export/service-keys.ts';
import { CLAIM_GENERATOR } from '../../src/recorder/aibom.ts';
import type { KeySigner } from '../../src/signing/index.ts';
import type { Vault } from '../../src/vault/index.ts';
import { stackBlobs } from './blobs.ts';

/** What retention needs on the stack: the vault, the stack's bucket, the signer; unsigned exports. */
export function retentionDeps(vault: Vault, signer: KeySigner): RetentionDeps {
  return {
    vault,
    blobs: stackBlobs(),
    signer,
    logKeys: [],
    ensureServiceKeys: exportKeys({ vault, signer }).ensureServiceKeys,
    claimGenerator: CLAIM_GENERATOR,
    requireSignedExports: false,
    trustAnchors: [],
  };
}

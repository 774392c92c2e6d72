import { generateKeyPairSync } from 'node:crypto';
import { createKeySigner, type KeySigner } from '../../../src/signing/key-signer.ts';

/** Bare-key signers (no certificate) generated per test run; never committed. */
export function p256Signer(): KeySigner {
  return createKeySigner({ privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey });
}

export function ed25519Signer(): KeySigner {
  return createKeySigner({ privateKey: generateKeyPairSync('ed25519').privateKey });
}

import { sign, verify, type KeyObject } from 'node:crypto';
import { TlogError } from './errors.ts';
import {
  ed25519PublicKey,
  ed25519Raw,
  formatVkey,
  isValidKeyName,
  keyIdOf,
  parseVkey,
  SIG_TYPE_COSIGNATURE_V1,
  signatureLine,
  type NoteSignature,
  type NoteVerifier,
} from './note.ts';

/**
 * Ed25519 witness cosignatures, c2sp.org/tlog-cosignature `cosignature/v1` (signature type 0x04):
 * a note signature line whose bytes are key id (4) ‖ timestamp (uint64 BE, POSIX seconds) ‖
 * Ed25519 signature (64) over
 *
 *   "cosignature/v1\ntime <timestamp>\n" ‖ <checkpoint note text>
 *
 * The witness's vkey is `<name>+<hex id>+base64(0x04 ‖ key)`. What a cosignature says: as of its
 * time, the largest consistent tree the witness has seen of this origin has this root.
 */

export const COSIGNATURE_HEADER = 'cosignature/v1';

export function cosignedMessage(text: string, timestamp: bigint): Buffer {
  return Buffer.from(`${COSIGNATURE_HEADER}\ntime ${timestamp.toString()}\n${text}`, 'utf8');
}

/** A witness as a verifier knows it: name and key from its vkey. */
export interface WitnessKey {
  readonly name: string;
  readonly keyId: number;
  readonly key: Buffer;
  readonly vkey: string;
}

export function parseWitnessVkey(vkey: string): WitnessKey {
  const k = parseVkey(vkey);
  if (k.type !== SIG_TYPE_COSIGNATURE_V1) {
    throw new TlogError(
      'MALFORMED_VKEY',
      `${k.name}: not a cosignature/v1 witness key (signature type ${k.type}, expected ${SIG_TYPE_COSIGNATURE_V1})`,
    );
  }
  return { name: k.name, keyId: k.keyId, key: k.key, vkey: vkey.trim() };
}

/** The timestamp of a cosignature's bytes (after the key id), or undefined when too short. */
export function cosignatureTimestamp(signature: Buffer): bigint | undefined {
  return signature.length === 72 ? signature.readBigUInt64BE(0) : undefined;
}

/** A note verifier for one witness's cosignature/v1 lines. */
export function cosignatureVerifier(witness: WitnessKey | string): NoteVerifier {
  const w = typeof witness === 'string' ? parseWitnessVkey(witness) : witness;
  const pub = ed25519PublicKey(w.key);
  return {
    name: w.name,
    keyId: w.keyId,
    verify: (text, signature) => {
      const ts = cosignatureTimestamp(signature);
      // The spec caps the timestamp at 2^63 - 1.
      if (ts === undefined || ts > 0x7fffffffffffffffn) return false;
      return verify(null, cosignedMessage(text, ts), pub, signature.subarray(8));
    },
  };
}

/** Whether a signature line is this witness's (name and key id), before verifying it. */
export function isWitnessSignature(sig: NoteSignature, witness: WitnessKey): boolean {
  return sig.name === witness.name && sig.keyId === witness.keyId;
}

/**
 * A cosigner (what a witness does): for unit tests and fakes of pure logic; the integration tests
 * use a real witness (litewitness).
 */
export function cosigner(
  name: string,
  privateKey: KeyObject,
): {
  readonly vkey: string;
  cosign(text: string, timestamp: bigint): string;
} {
  if (!isValidKeyName(name)) throw new TlogError('MALFORMED_VKEY', `invalid key name "${name}"`);
  const raw = ed25519Raw(privateKey);
  const keyId = keyIdOf(name, SIG_TYPE_COSIGNATURE_V1, raw);
  return {
    vkey: formatVkey(name, SIG_TYPE_COSIGNATURE_V1, raw),
    cosign: (text, timestamp) => {
      const ts = Buffer.alloc(8);
      ts.writeBigUInt64BE(timestamp);
      const sig = sign(null, cosignedMessage(text, timestamp), privateKey);
      return signatureLine(name, keyId, Buffer.concat([ts, sig]));
    },
  };
}

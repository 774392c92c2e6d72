import { Decoder, Encoder, Tag } from 'cbor-x';

/**
 * An independent CBOR view for tests: plain cbor-x, configured here and not through src/cose, so a
 * test that inspects or forges COSE bytes does not trust the code it checks.
 */
export const cbor = new Decoder({ mapsAsObjects: false, useRecords: false });
/** Maps as plain objects (text-keyed documents such as C2PA claims). */
export const objects = new Decoder({ useRecords: false, mapsAsObjects: true });
export const plain = new Encoder({ useRecords: false, tagUint8Array: false, mapsAsObjects: false });

export interface CoseParts {
  readonly tag: number | undefined;
  readonly protectedBytes: Buffer;
  readonly unprotected: Map<unknown, unknown>;
  readonly payload: Buffer | null;
  readonly signature: Buffer;
}

/** The four members of a COSE_Sign1 (tagged or not), decoded without src/cose. */
export function coseParts(bytes: Uint8Array): CoseParts {
  const item: unknown = cbor.decode(bytes);
  const tagged = item instanceof Tag ? item : undefined;
  const [protectedBytes, unprotected, payload, signature] = (tagged ? tagged.value : item) as [
    Buffer,
    Map<unknown, unknown>,
    Buffer | null,
    Buffer,
  ];
  return { tag: tagged?.tag, protectedBytes, unprotected, payload, signature };
}

/** ["Signature1", protected, h'', payload] (RFC 9052 §4.4), encoded without src/cose. */
export function sigStructureOf(protectedBytes: Uint8Array, payload: Uint8Array): Buffer {
  return plain.encode(['Signature1', protectedBytes, Buffer.alloc(0), payload]);
}

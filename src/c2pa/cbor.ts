import { Decoder, Encoder } from 'cbor-x';

/**
 * One CBOR configuration for everything C2PA, avoiding three cbor-x defaults that produce bytes
 * no other CBOR stack expects: Uint8Array tagged 64 (`tagUint8Array`), objects as cbor-x records
 * (tag 105, `useRecords`), and, when `mapsAsObjects` is on, JS `Map`s wrapped in tag 259, which
 * turns a COSE protected header into something c2pa-rs cannot parse (it then fails with the
 * misleading "could not generate a trusted time stamp"). `variableMapSize` gives minimal-length
 * map headers, the preferred serialisation. Objects with string keys become CBOR maps in
 * insertion order; COSE headers are `Map`s because their keys are integers.
 */
const encoder = new Encoder({
  useRecords: false,
  tagUint8Array: false,
  variableMapSize: true,
  mapsAsObjects: false,
  pack: false,
  bundleStrings: false,
  encodeUndefinedAsNil: false,
});

/** Claims and assertions have text keys: decode maps as plain objects. */
const objectDecoder = new Decoder({ useRecords: false, mapsAsObjects: true });

/** COSE structures have integer keys: decode maps as `Map`s so `1` and `"1"` stay distinct. */
const mapDecoder = new Decoder({ useRecords: false, mapsAsObjects: false });

export function encodeCbor(value: unknown): Buffer {
  return encoder.encode(value);
}

export function decodeCborObject(data: Buffer): unknown {
  return objectDecoder.decode(data);
}

export function decodeCborMaps(data: Buffer): unknown {
  return mapDecoder.decode(data);
}

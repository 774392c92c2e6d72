/**
 * DSSE v1 Pre-Authentication Encoding
 * (https://github.com/secure-systems-lab/dsse/blob/master/protocol.md):
 *
 *   PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
 *
 * LEN is the byte length (not the character count) as ASCII decimal without leading zeros; type is
 * UTF-8. The signature covers exactly these bytes, never the base64 text of the envelope.
 */
const IN_TOTO_PREFIX = Buffer.from('DSSEv1 28 application/vnd.in-toto+json ', 'ascii');

export function preAuthEncoding(payloadType: string, payload: Buffer): Buffer {
  // The in-toto type is the only one the vault signs; its prefix is computed once.
  const prefix =
    payloadType === 'application/vnd.in-toto+json'
      ? IN_TOTO_PREFIX
      : Buffer.concat([
          Buffer.from(`DSSEv1 ${Buffer.byteLength(payloadType, 'utf8')} `, 'ascii'),
          Buffer.from(payloadType, 'utf8'),
          Buffer.from(' ', 'ascii'),
        ]);
  const length = Buffer.from(`${payload.length} `, 'ascii');
  return Buffer.concat([prefix, length, payload], prefix.length + length.length + payload.length);
}

/** PAEs up to this size may be written into the reused buffer (a statement is ~1 KB; an AIBOM more). */
const SCRATCH_MAX = 64 * 1024;
/** The reused buffer, starting with the in-toto prefix (written once). */
let scratch = withPrefix(Buffer.allocUnsafeSlow(4096));

function withPrefix(buffer: Buffer): Buffer {
  IN_TOTO_PREFIX.copy(buffer, 0);
  return buffer;
}

/**
 * PAE of the in-toto payload type over the UTF-8 bytes of `text`, written straight into one
 * buffer (no separate payload buffer, no concatenation copy): `payload` is the tail of `pae`, the
 * very bytes `Buffer.from(text, 'utf8')` would give. The signing path's shape (signStatement).
 *
 * With `transient`, the bytes may be written into a module-level buffer that the next call
 * overwrites: for a caller that uses them synchronously and keeps nothing (signStatement with a
 * signer that keeps no reference, signer.ts). It saves an allocation per signature, and the
 * Buffer pool's refills, on the seal path (docs/bench.md, issue 29).
 */
export function inTotoPreAuthEncodingOfText(
  text: string,
  transient = false,
): { pae: Buffer; payload: Buffer } {
  const length = Buffer.byteLength(text, 'utf8');
  const head = `${length} `;
  const start = IN_TOTO_PREFIX.length + head.length;
  const size = start + length;
  let pae: Buffer;
  if (transient && size <= SCRATCH_MAX) {
    if (scratch.length < size) scratch = withPrefix(Buffer.allocUnsafeSlow(Math.min(SCRATCH_MAX, 2 * size)));
    pae = scratch.subarray(0, size);
  } else {
    pae = Buffer.allocUnsafe(size);
    IN_TOTO_PREFIX.copy(pae, 0);
  }
  pae.write(head, IN_TOTO_PREFIX.length, 'latin1');
  pae.write(text, start, 'utf8');
  return { pae, payload: pae.subarray(start) };
}

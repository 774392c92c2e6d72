import { hash } from 'node:crypto';

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * A name-based UUIDv8 (RFC 9562 §5.8, the SHA-256 construction of its Appendix B.2 without a
 * namespace UUID): the first 16 bytes of SHA-256(UTF-8 `name`), version nibble set to 8 and the
 * variant bits to 10, printed in lower case. Same name, same UUID, on any machine.
 */
export function nameBasedUuidV8(name: string): string {
  const b = hash('sha256', name, 'buffer').subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The AIBOM serial number of a run: `urn:uuid:` + nameBasedUuidV8(`aibom:<run_id>`). */
export function aibomSerialNumber(runId: string): string {
  return `urn:uuid:${nameBasedUuidV8(`aibom:${runId}`)}`;
}

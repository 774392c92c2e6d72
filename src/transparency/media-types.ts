/** Media types of the SCITT wire protocol (SCRAPI) and of our statement preimage. */
export const MediaType = {
  cose: 'application/cose',
  cbor: 'application/cbor',
  problem: 'application/concise-problem-details+cbor',
  /** What the hash in a statement is the hash of: the RFC 8785 JSON of a DSSE envelope. */
  dsseEnvelope: 'application/vnd.dsse.envelope+json',
} as const;

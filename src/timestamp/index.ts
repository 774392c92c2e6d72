/**
 * RFC 3161 time-stamping: evidence that a signature existed while its certificate was valid, so it
 * can be verified after the certificate expires. `rfc3161.ts` is pure (request, parse, verify);
 * `client.ts` talks to a TSA over HTTP with a deadline.
 */
export { createTsaClient, type Timestamper, type TsaClientOptions } from './client.ts';
export { TimestampError, type TimestampErrorCode } from './errors.ts';
export {
  EKU_TIME_STAMPING,
  randomNonce,
  readTimestamp,
  timestampRequest,
  verifyTimestamp,
  type TimestampRequest,
  type TstInfo,
  type VerifiedTimestamp,
  type VerifyTimestampOptions,
} from './rfc3161.ts';
export {
  dsseSignatureBytes,
  timestampDsseSignature,
  verifyDsseSignatureTimestamp,
  type Rfc3161SignedTimestamp,
  type SignedEnvelope,
} from './sigstore.ts';

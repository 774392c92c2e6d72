/**
 * RFC 3161 time-stamping: evidence that a signature existed while its certificate was valid, so it
 * can be verified after the certificate expires. `rfc3161.ts` is pure (request, parse, verify);
 * `client.ts` talks to a TSA over HTTP with a deadline. `stamper.ts` (time-stamps of stored records,
 * over the vault's queue) is imported on its own by the controller, so verifiers that import this
 * module never load the database client.
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
  SIGSTORE_TRUSTED_ROOT,
  timestampDsseSignature,
  tsaTrustedRoot,
  verifyDsseSignatureTimestamp,
  type Rfc3161SignedTimestamp,
  type SignedEnvelope,
} from './sigstore.ts';

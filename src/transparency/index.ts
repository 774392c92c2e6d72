/**
 * SCITT transparency: RFC 9162 Merkle log, COSE signed statements and receipts (pure), the
 * PostgreSQL log and job queue, the SCRAPI wire client and server, the publisher and its worker.
 * See docs/transparency.md.
 */
export {
  assertReceipt,
  attachReceipt,
  decodeReceipt,
  encodeInclusionProof,
  entryOf,
  issueReceipt,
  receiptsOf,
  statementLeafHash,
  verifyReceipt,
  VDP_INCLUSION,
  VDS_RFC9162_SHA256,
  type DecodedReceipt,
  type InclusionProof,
  type ReceiptInput,
  type ReceiptProblemCode,
  type ReceiptVerification,
  type VerifyReceiptInput,
} from './receipt.ts';
export {
  buildSignedStatement,
  Claim,
  CoseAlg,
  coseKid,
  decodeKeySet,
  decodeSign1,
  encodeKeySet,
  Header,
  logKeyOf,
  MediaType,
  signSign1,
  statementChain,
  verifySign1,
  verifySignedStatement,
  type CoseSign1,
  type LogKey,
  type SignedStatement,
  type StatementInput,
  type VerifiedStatement,
  type VerifyStatementOptions,
} from './cose.ts';
export { didX509, matchDidX509, percentEncode, type DidX509Policy } from './did-x509.ts';
export { isTransparencyError, TransparencyError, type TransparencyErrorCode } from './errors.ts';
export {
  backoffDelay,
  claim,
  complete,
  DEFAULT_RETRY_POLICY,
  enqueue,
  fail,
  getJob,
  getJobsByAttestation,
  queueStats,
  renewLease,
  requeue,
  setStatement,
  transparencyView,
  type ClaimedJob,
  type JobBackend,
  type JobState,
  type Publication,
  type RetryPolicy,
  type TransparencyJob,
  type TransparencyView,
} from './jobs.ts';
export {
  createLocalLog,
  type AppendResult,
  type ConsistencyProof,
  type LocalLog,
  type LocalLogOptions,
  type LogEntry,
  type TreeHead,
} from './local-log.ts';
export {
  EMPTY_ROOT,
  leafHash,
  MemoryTree,
  merkleRoot,
  nodeHash,
  rootFromInclusionProof,
  verifyConsistency,
  verifyInclusion,
} from './merkle.ts';
export {
  createPublisher,
  type AttestationToPublish,
  type PublishBackend,
  type Publisher,
  type PublisherDeps,
} from './publisher.ts';
export { decodeProblemDetails, encodeProblemDetails, type ProblemDetails } from './problem-details.ts';
export {
  createScrapiClient,
  parseRetryAfter,
  type Registration,
  type ScrapiClient,
  type ScrapiClientOptions,
} from './scrapi-client.ts';
export {
  registerScrapiRoutes,
  type RegistrationMode,
  type ScrapiAction,
  type ScrapiRouteDeps,
} from './scrapi-routes.ts';
export { createWorker, type TransparencyWorker, type WorkerOptions } from './worker.ts';

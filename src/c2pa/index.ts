/** C2PA 1.4 manifest stores for artifacts that carry no embedded manifest (`.c2pa` sidecars). Pure: no I/O. */
export { C2paError, type C2paProblem, type C2paProblemCode } from './errors.ts';
export { ATTESTATIONS_LABEL } from './labels.ts';
export { SIG_TST, sigTstOf, timestampedData } from './claim-signature.ts';
export {
  buildManifest,
  buildTimestampedManifest,
  type AttestationsAssertion,
  type BuildManifestInput,
  type BuiltManifest,
} from './manifest.ts';
export { verifyManifest, type VerifyManifestInput, type VerifyManifestResult } from './verify.ts';

/** Media type of a manifest store (C2PA 1.4 §11.4), for the sidecar object and downloads. */
export const C2PA_MEDIA_TYPE = 'application/c2pa';

/**
 * The dev PKI tests generate keys and CAs with (never committed). One import site for the test
 * helpers that need it, so where the generator lives is a one-line change.
 */
export {
  generateDevPki,
  generateTsaPki,
  toSecretData,
  type DevPki,
  type DevTsaPki,
} from '../../hack/dev-pki.ts';

import { PredicateTypes, subjectNames, type Statement, type Subject } from '../statement.ts';
import { assertPredicate } from '../schemas.ts';
import { makeStatement } from '../statement.ts';

export interface AibomInput {
  runId: string;
  /** The BOM document (the AIBOM payload); it is the predicate, verbatim. */
  bom: unknown;
  /** Hex SHA-256 of the BOM bytes exactly as stored in the object store. */
  sha256: string;
  /** Artifact name of the BOM within the run; default `aibom`. */
  name?: string;
}

/**
 * The AIBOM attestation: predicateType `https://cyclonedx.org/bom` (so
 * `cosign verify-blob-attestation --type cyclonedx` accepts it), subject the stored BOM artifact
 * `artifact:<runId>:<name>`. The subject digest cannot be derived from the predicate (the stored
 * bytes are a serialisation chosen by the AIBOM module), so the caller supplies it.
 */
export function aibomStatement(input: AibomInput): Statement<unknown, typeof PredicateTypes.aibom> {
  assertPredicate(PredicateTypes.aibom, input.bom);
  const subject: Subject = {
    digest: { sha256: input.sha256 },
    name: subjectNames.artifact(input.runId, input.name ?? 'aibom'),
  };
  return makeStatement([subject], PredicateTypes.aibom, input.bom);
}

export interface ViewStatementInput {
  runId: string;
  /** The view's artifact name within the run, e.g. `aibom.cdx-1.7.json`. */
  name: string;
  /** The standard's predicate type: CycloneDX (`https://cyclonedx.org/bom`) or SPDX 3. */
  predicateType: typeof PredicateTypes.aibom | typeof PredicateTypes.spdx;
  /** The view document; it is the predicate, verbatim. */
  document: unknown;
  /** Hex SHA-256 of the view's bytes (the UTF-8 of the JCS of `document`). */
  sha256: string;
}

/**
 * A standard view of the AIBOM (src/aibom/views) as an attestation: the view is the predicate,
 * under its standard's predicate type (so `cosign verify-blob-attestation --type cyclonedx` or
 * `--type https://spdx.dev/Document/v3` accepts it), subject `artifact:<runId>:<name>` with the
 * digest of the view's bytes.
 */
export function viewStatement(
  input: ViewStatementInput,
): Statement<unknown, typeof PredicateTypes.aibom | typeof PredicateTypes.spdx> {
  assertPredicate(input.predicateType, input.document);
  const subject: Subject = {
    digest: { sha256: input.sha256 },
    name: subjectNames.artifact(input.runId, input.name),
  };
  return makeStatement([subject], input.predicateType, input.document);
}

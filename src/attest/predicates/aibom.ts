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
    name: subjectNames.artifact(input.runId, input.name ?? 'aibom'),
    digest: { sha256: input.sha256 },
  };
  return makeStatement([subject], PredicateTypes.aibom, input.bom);
}

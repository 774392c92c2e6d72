import { PredicateTypes, subjectNames, type DigestSet, type Statement, type Subject } from '../statement.ts';
import { buildStatement } from './common.ts';

/**
 * Where an artifact's bytes are: an object in the store (the AIBOM blob), or the output of a step
 * of the run, whose bytes are the RFC 8785 (JCS) serialisation of that JSON value, UTF-8 (as the
 * Run's `status.steps[].output` and the run detail hold it; docs/predicates/README.md).
 */
export type ArtifactLocation = { bucket: string; key: string } | { step: string };

/** Mirrors docs/predicates/artifact.schema.json. */
export interface ArtifactPredicate {
  runId: string;
  name: string;
  mediaType: string;
  digest: DigestSet;
  size: number;
  location: ArtifactLocation;
}

interface ArtifactBase {
  runId: string;
  /** Artifact name within the run, e.g. `aibom`; no whitespace. */
  name: string;
  mediaType: string;
  /** Hex SHA-256 of the artifact bytes. */
  sha256: string;
  size: number;
}

/** An object-store artifact (`bucket`, `key`) or a step's output (`step`). */
export type ArtifactInput = ArtifactBase & ({ bucket: string; key: string } | { step: string });

/** Subject `artifact:<runId>:<name>` with the digest of the artifact bytes. */
export function artifactSubject(predicate: ArtifactPredicate): Subject {
  return {
    digest: { sha256: predicate.digest.sha256 },
    name: subjectNames.artifact(predicate.runId, predicate.name),
  };
}

export function artifactStatement(
  input: ArtifactInput,
): Statement<ArtifactPredicate, typeof PredicateTypes.artifact> {
  // Members in JCS order (makeStatement says why).
  const predicate: ArtifactPredicate = {
    digest: { sha256: input.sha256 },
    location: 'step' in input ? { step: input.step } : { bucket: input.bucket, key: input.key },
    mediaType: input.mediaType,
    name: input.name,
    runId: input.runId,
    size: input.size,
  };
  return buildStatement(PredicateTypes.artifact, predicate, artifactSubject);
}

import { PredicateTypes, subjectNames, type DigestSet, type Statement, type Subject } from '../statement.ts';
import { buildStatement } from './common.ts';

/** Mirrors docs/predicates/artifact.schema.json. */
export interface ArtifactPredicate {
  runId: string;
  name: string;
  mediaType: string;
  digest: DigestSet;
  size: number;
  location: { bucket: string; key: string };
}

export interface ArtifactInput {
  runId: string;
  /** Artifact name within the run, e.g. `aibom`; no whitespace. */
  name: string;
  mediaType: string;
  /** Hex SHA-256 of the stored bytes. */
  sha256: string;
  size: number;
  bucket: string;
  key: string;
}

/** Subject `artifact:<runId>:<name>` with the digest of the artifact bytes. */
export function artifactSubject(predicate: ArtifactPredicate): Subject {
  return {
    name: subjectNames.artifact(predicate.runId, predicate.name),
    digest: { sha256: predicate.digest.sha256 },
  };
}

export function artifactStatement(
  input: ArtifactInput,
): Statement<ArtifactPredicate, typeof PredicateTypes.artifact> {
  const predicate: ArtifactPredicate = {
    runId: input.runId,
    name: input.name,
    mediaType: input.mediaType,
    digest: { sha256: input.sha256 },
    size: input.size,
    location: { bucket: input.bucket, key: input.key },
  };
  return buildStatement(PredicateTypes.artifact, predicate, artifactSubject);
}

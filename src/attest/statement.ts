import type { JsonValue } from './json.ts';

/** in-toto Statement v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md). */
export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1';

/** in-toto DigestSet restricted to the one algorithm the vault uses; lower-case hex. */
export interface DigestSet {
  sha256: string;
}

/**
 * in-toto ResourceDescriptor restricted to what the vault emits: a name, a SHA-256 and, on the
 * first subject of a stored record, the vault's labels as an annotation (labels.ts).
 */
export interface Subject {
  name: string;
  digest: DigestSet;
  annotations?: { [key: string]: JsonValue };
}

export interface Statement<P = unknown, T extends string = string> {
  _type: typeof STATEMENT_TYPE;
  subject: Subject[];
  predicateType: T;
  predicate: P;
}

/** Predicate type URIs. Third-party types for runs and the AIBOM, the vault's own for the rest. */
export const PredicateTypes = {
  provenance: 'https://slsa.dev/provenance/v1',
  aibom: 'https://cyclonedx.org/bom',
  /** SPDX 3 documents: the AIBOM's SPDX 3.0.1 view (src/aibom/views). */
  spdx: 'https://spdx.dev/Document/v3',
  step: 'https://vault.service.dev/attestations/step/v1',
  policy: 'https://vault.service.dev/attestations/policy/v1',
  artifact: 'https://vault.service.dev/attestations/artifact/v1',
  capability: 'https://vault.service.dev/attestations/capability/v1',
} as const;

export type PredicateType = (typeof PredicateTypes)[keyof typeof PredicateTypes];

/**
 * Subject names, the spec's trust subjects. Colons separate fields, so ids may not contain one
 * (the predicate schemas enforce it); an artifact name is last and may.
 */
export const subjectNames = {
  run: (runId: string): string => `run:${runId}`,
  step: (runId: string, stepId: string): string => `step:${runId}:${stepId}`,
  artifact: (runId: string, name: string): string => `artifact:${runId}:${name}`,
  policy: (pack: string, version: string): string => `policy:${pack}@${version}`,
  capability: (runId: string, stepId: string, index: number): string =>
    `capability:${runId}:${stepId}:${index}`,
};

export function makeStatement<P, T extends string>(
  subject: Subject[],
  predicateType: T,
  predicate: P,
): Statement<P, T> {
  // Members in JCS order (RFC 8785: sorted by UTF-16 code units), as every builder writes its
  // objects: canonicalJson then finds them sorted and serialises with JSON.stringify alone, with no
  // sorted copy (the seal path's goal, docs/bench.md). Order is speed only: the bytes are the same.
  return { _type: STATEMENT_TYPE, predicate, predicateType, subject };
}

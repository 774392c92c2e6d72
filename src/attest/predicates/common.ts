import { assertPredicate } from '../schemas.ts';
import { makeStatement, type PredicateType, type Statement, type Subject } from '../statement.ts';

/** A policy pack as recorded in predicates: `name` may not contain `@` (it separates the version). */
export interface PolicyPackRef {
  name: string;
  version: string;
}

/**
 * The one statement constructor of the builders: validates the predicate against its published
 * schema (so nothing the verifier would reject is ever signed) and derives the subject from the
 * predicate with the same function the verifier uses to check it.
 */
export function buildStatement<P, T extends PredicateType>(
  predicateType: T,
  predicate: P,
  subjectOf: (predicate: P) => Subject,
): Statement<P, T> {
  assertPredicate(predicateType, predicate);
  return makeStatement([subjectOf(predicate)], predicateType, predicate);
}

import { ProblemError } from '../problem.ts';

/**
 * Most namespaces one query may name, and most a caller without a cluster-wide grant may have
 * reviewed one by one when it names none. With the cluster-wide question first, a query costs at
 * most 1 + MAX_QUERY_NAMESPACES SubjectAccessReviews (1 for a caller allowed cluster-wide),
 * whatever it asks and whoever asks (docs/api.md, "Authorisation cost").
 */
export const MAX_QUERY_NAMESPACES = 16;

export interface Listable {
  /** Namespaces the query may read. */
  readonly allowed: string[];
  /** How many of the namespaces asked for (or holding records) the caller may not list. */
  readonly excluded: number;
}

/**
 * The 400 asking a caller without a cluster-wide grant to name the namespaces (at most
 * MAX_QUERY_NAMESPACES): `verb` and `resource` say what the cluster-wide grant would be, `pointer`
 * is the route's parameter.
 */
export const nameNamespaces =
  (verb: 'read' | 'list', resource: string, pointer: string) => (): ProblemError =>
    new ProblemError(
      400,
      'VALIDATION_FAILED',
      `name the namespaces to ${verb} (at most ${MAX_QUERY_NAMESPACES}): ${verb}ing every namespace needs list on ${resource} cluster-wide`,
      { errors: [{ pointer, message: 'required for this caller' }] },
    );

const tooMany = nameNamespaces('read', 'attestations', '/body/namespaces');

/**
 * The namespaces a query may read: those `named` (or, when none are, every namespace holding
 * records) that `mayList` allows. The cluster-wide question comes first, so a caller allowed
 * everywhere costs one review; the others cost one review per candidate, at most
 * MAX_QUERY_NAMESPACES of them: more is refused before any is reviewed.
 */
export async function listableNamespaces(
  mayList: (namespace: string) => Promise<boolean>,
  named: readonly string[] | undefined,
  holdingRecords: () => Promise<string[]>,
  /** The 400 that asks the caller to name namespaces (its pointer is the route's parameter). */
  refuse: () => ProblemError = tooMany,
): Promise<Listable> {
  if (named !== undefined && named.length > MAX_QUERY_NAMESPACES) throw refuse();
  const clusterWide = await mayList('');
  const candidates = named ?? (await holdingRecords());
  if (clusterWide) return { allowed: [...candidates], excluded: 0 };
  if (candidates.length > MAX_QUERY_NAMESPACES) throw refuse();
  const decisions = await Promise.all(candidates.map(async (ns) => [ns, await mayList(ns)] as const));
  const allowed = decisions.filter(([, ok]) => ok).map(([ns]) => ns);
  return { allowed, excluded: candidates.length - allowed.length };
}

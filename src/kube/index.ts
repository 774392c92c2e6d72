/**
 * A small Kubernetes client library (no Run-specific logic): kubeconfig and in-cluster access, a
 * REST client, list-watch, an informer
 * with a watchdog, Lease leader election, condition helpers, status SSA, finalizers and an Event
 * recorder. The keyed work queue and its workers live in src/queue. See
 * docs/adr/0002-controller-runtime.md.
 */
export * from './access.ts';
export * from './client.ts';
export * from './listwatch.ts';
export * from './informer.ts';
export * from './leader.ts';
export * from './conditions.ts';
export * from './status.ts';
export * from './events.ts';
export * from './equal.ts';

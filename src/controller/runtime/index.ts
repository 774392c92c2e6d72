/**
 * Generic controller primitives (no Run-specific logic): a REST client, a keyed work queue with
 * workers, an informer with a watchdog, Lease leader election, condition helpers, status SSA,
 * finalizers and an Event recorder. See docs/adr/0002-controller-runtime.md.
 */
export * from './kube.ts';
export * from './ratelimit.ts';
export * from './workqueue.ts';
export * from './workers.ts';
export * from './listwatch.ts';
export * from './informer.ts';
export * from './leader.ts';
export * from './conditions.ts';
export * from './status.ts';
export * from './events.ts';
export * from './equal.ts';

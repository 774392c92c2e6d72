/**
 * Job loops (no Kubernetes, no Run-specific logic): a keyed work queue with rate limits and
 * workers (the controller's reconcile loop), the queue loop that drains a vault-backed job table
 * (SCITT registrations, time-stamps, AIBOM seals), and an abortable sleep.
 */
export * from './ratelimit.ts';
export * from './workqueue.ts';
export * from './workers.ts';
export * from './deadline.ts';
export * from './loop.ts';
export * from './queue-loop.ts';
export * from './sleep.ts';

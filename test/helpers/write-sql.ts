/**
 * SQL that writes, as the "0 writes for converged Runs" checks count it: DML (also behind a WITH),
 * COPY, a transaction, a notify, and the vault's write functions. Pure (no vitest), so the restart
 * benchmark counts with the same pattern as the converged and restart tests.
 */
export const WRITE_SQL =
  /^\s*(?:WITH\b[\s\S]*\b)?(?:INSERT|UPDATE|DELETE|COPY|MERGE|TRUNCATE)\b|^\s*BEGIN\b|\bpg_notify\s*\(|\b(?:runs_upsert|transparency_jobs_\w+|scitt_log_advance|\w+_lock_head)\s*\(/i;

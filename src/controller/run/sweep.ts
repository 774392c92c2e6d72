import type { Run } from '../../crd/run.ts';
import { claimOf } from '../../recorder/index.ts';

/**
 * The Runs whose status shows more records than the vault holds: after the database lost
 * acknowledged writes (a failover to a standby without the last transactions, a restore), their
 * reconcile finds what is missing and records it again (recorder/losses.ts). A converged Run is
 * otherwise never reconciled, so the controller asks this at the start of each leadership term and
 * after every reconnect of its LISTEN connection (which a failover breaks): one count query per
 * thousand Runs, not the four reads of a reconcile per Run.
 */
export async function runsMissingRecords(
  runs: readonly Run[],
  recordCounts: (runIds: readonly string[]) => Promise<Map<string, number>>,
): Promise<Run[]> {
  const claiming = runs.filter((r) => claimOf(r).count > 0);
  if (claiming.length === 0) return [];
  const held = await recordCounts(claiming.map((r) => r.metadata.uid));
  return claiming.filter((r) => claimOf(r).count > (held.get(r.metadata.uid) ?? 0));
}

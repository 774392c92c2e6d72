import { uuidV7Time, type PartitionInfo, type PartitionRepository } from '../../../vault/index.ts';

/** How long the list of retired months is reused before it is read again. */
const REFRESH_MS = 60_000;

/**
 * What a 404 of GET /v1/attestations/{id} adds when the id's month was retired (VAULT_RETENTION_MONTHS:
 * archived to signed export bundles, then detached; docs/vault.md "Retention"): the record may be in
 * an archive bundle rather than nowhere. The text depends only on the id's UUIDv7 time and on which
 * months are retired, never on whether such a record existed or in which namespace, so every caller
 * gets it for every id of that month (the 404 of an id that exists and one that never did must stay
 * alike). The list is read at most once a minute, by one query at a time: a stream of unknown ids
 * costs no more database reads than one does. A failed read gives no text (the plain 404).
 */
export function retiredRecordNote(
  partitions: Pick<PartitionRepository, 'list'>,
): (id: string) => Promise<string | undefined> {
  let retired: readonly PartitionInfo[] = [];
  let readAt = -Infinity;
  let reading: Promise<void> | undefined;
  const refresh = async (): Promise<void> => {
    try {
      // Archived but still attached: its records are still served, so nothing to say yet.
      retired = (await partitions.list()).filter((p) => p.state === 'detached' || p.state === 'dropped');
    } catch {
      // Keep what was known; the next minute tries again.
    }
    readAt = performance.now();
  };
  return async (id) => {
    if (performance.now() - readAt > REFRESH_MS) {
      reading ??= refresh().finally(() => (reading = undefined));
      await reading;
    }
    let t: number;
    try {
      t = uuidV7Time(id).getTime();
    } catch {
      return undefined; // not a UUIDv7 (the route's schema admits only those)
    }
    const p = retired.find((r) => (r.from === null || r.from.getTime() <= t) && t < r.to.getTime());
    if (p === undefined) return undefined;
    const span =
      p.from === null
        ? `before ${p.to.toISOString()}`
        : `from ${p.from.toISOString()} to ${p.to.toISOString()}`;
    return (
      `records created ${span} were retired from the live vault to signed export bundles in the ` +
      'object store (VAULT_RETENTION_MONTHS; docs/vault.md "Retention"): an operator reads them there'
    );
  };
}

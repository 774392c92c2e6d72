import type { Logger } from '../log/index.ts';
import type { Loop } from '../queue/loop.ts';
import { sleep } from '../queue/sleep.ts';
import type { KeySigner } from '../signing/index.ts';
import { retainPartitions, type RetentionDeps } from './archive.ts';

/**
 * The leader's partition round (src/controller/manager.ts): at the start of each term and then
 * every `intervalMs`, creates the vault's monthly partitions `ahead` months in advance (so a
 * controller that runs for years never lets appends reach a month without one) and, when
 * `months` is set, archives and detaches the partitions past the retention (archive.ts). A failed
 * round is logged and the next one tries again.
 */
export interface PartitionLoopConfig {
  /** VAULT_PARTITIONS_AHEAD */
  readonly ahead: number;
  /** VAULT_RETENTION_MONTHS; 0 keeps every partition attached. */
  readonly months: number;
  /** VAULT_RETENTION_DROP */
  readonly drop: boolean;
  /** VAULT_ARCHIVE_PREFIX */
  readonly prefix: string;
  readonly intervalMs: number;
}

export function partitionLoop(
  deps: Omit<RetentionDeps, 'signer'> & { readonly signer: () => KeySigner; readonly logger: Logger },
  config: PartitionLoopConfig,
): Loop {
  const log = deps.logger.child({ component: 'vault-partitions' });
  return {
    name: 'vault-partitions',
    async run(signal) {
      while (!signal.aborted) {
        try {
          const created = await deps.vault.partitions.ensure(config.ahead);
          if (created.length > 0) log.info({ partitions: created }, 'created vault partitions ahead');
          if (config.months > 0) {
            const done = await retainPartitions(
              { ...deps, signer: deps.signer(), logger: log },
              { months: config.months, drop: config.drop, prefix: config.prefix },
            );
            for (const d of done)
              log.info({ partition: d.name, records: d.records, key: d.key }, 'partition retired');
          }
        } catch (err) {
          log.error({ err }, 'vault partition round failed; retrying next round');
        }
        await sleep(config.intervalMs, signal);
      }
    },
  };
}

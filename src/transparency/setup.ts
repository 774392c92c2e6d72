import type { X509Certificate } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from '../log/index.ts';
import type { Signer } from '../signing/index.ts';
import type { Vault } from '../vault/index.ts';
import { enqueue, type TransparencyJob } from './jobs.ts';
import { createLocalLog, type LocalLog } from './local-log.ts';
import { createPublisher, type PublishBackend, type Publisher } from './publisher.ts';
import { createScrapiClient } from './scrapi-client.ts';

export interface TransparencyConfig {
  readonly vault: Vault;
  /** Signs statements (the service signer, with its chain). */
  readonly signer: Signer;
  readonly caCertificates: readonly X509Certificate[];
  /** Signs receipts of the local log. */
  readonly logSigner: Signer;
  readonly issuer: string;
  readonly backend: 'local' | 'scrapi';
  readonly scittUrl?: string;
  readonly scittToken?: string;
  readonly logger: Logger;
  readonly onPublished?: (job: TransparencyJob) => void | Promise<void>;
}

export interface Transparency {
  /** This service's own log (served over SCRAPI by the sidecar; the `local` backend appends to it). */
  readonly log: LocalLog;
  readonly publisher: Publisher;
  /** For `append(..., { inTransaction })`: the job commits with its attestation, or neither does. */
  readonly enqueueInTransaction: (
    client: pg.PoolClient,
    inserted: readonly { id: string }[],
  ) => Promise<void>;
  /** Called after an append that enqueued jobs has committed: wakes this process's worker. */
  readonly committed: () => void;
  /** The worker registers itself here to be woken by `committed`. */
  readonly onCommitted: (wake: () => void) => void;
}

/** Wires the local log, the chosen backend and the publisher from configuration. */
export function setupTransparency(cfg: TransparencyConfig): Transparency {
  const pool = cfg.vault.pool;
  const log = createLocalLog({ pool, signer: cfg.logSigner, issuer: cfg.issuer });
  let backend: PublishBackend;
  if (cfg.backend === 'scrapi') {
    if (cfg.scittUrl === undefined) throw new Error('SCITT_BACKEND=scrapi needs SCITT_URL');
    const token = cfg.scittToken;
    backend = {
      kind: 'scrapi',
      client: createScrapiClient({
        baseUrl: cfg.scittUrl,
        ...(token !== undefined ? { headers: { authorization: `Bearer ${token}` } } : {}),
      }),
    };
  } else {
    backend = { kind: 'local', log };
  }
  const publisher = createPublisher({
    pool,
    backend,
    signer: cfg.signer,
    caCertificates: cfg.caCertificates,
    loadAttestation: (id) => cfg.vault.get(id),
    logger: cfg.logger,
    ...(cfg.onPublished ? { onPublished: cfg.onPublished } : {}),
  });
  const wakers: (() => void)[] = [];
  return {
    log,
    publisher,
    committed: () => {
      for (const w of wakers) w();
    },
    onCommitted: (wake) => {
      wakers.push(wake);
    },
    enqueueInTransaction: async (client, inserted) => {
      await enqueue(
        client,
        inserted.map((s) => s.id),
      );
    },
  };
}

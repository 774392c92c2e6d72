import type { X509Certificate } from 'node:crypto';
import { ConfigError } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import type { Signer } from '../signing/index.ts';
import type { Vault } from '../vault/index.ts';
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
  /** Deadline of one request to the remote SCRAPI service (SCITT_TIMEOUT_MS). */
  readonly scittTimeoutMs?: number;
  readonly logger: Logger;
}

/**
 * The transparency subsystem of one process. Jobs are enqueued by the vault itself, in the
 * transaction of the records (`enqueueTransparency`), and every process hears about them through
 * the vault's listener: nothing here needs to be told.
 */
export interface Transparency {
  /** This service's own log (served over SCRAPI by the sidecar; the `local` backend appends to it). */
  readonly log: LocalLog;
  readonly publisher: Publisher;
  /** The key that signs the local log's receipts (exports ship its chain beside the log keys). */
  readonly logSigner: Signer;
}

/** Wires the local log, the chosen backend and the publisher from configuration. */
export function setupTransparency(cfg: TransparencyConfig): Transparency {
  const log = createLocalLog({ storage: cfg.vault.scittLog, signer: cfg.logSigner, issuer: cfg.issuer });
  let backend: PublishBackend;
  if (cfg.backend === 'scrapi') {
    if (cfg.scittUrl === undefined) throw new ConfigError(['SCITT_BACKEND=scrapi needs SCITT_URL']);
    const token = cfg.scittToken;
    backend = {
      kind: 'scrapi',
      client: createScrapiClient({
        baseUrl: cfg.scittUrl,
        ...(token !== undefined ? { headers: { authorization: `Bearer ${token}` } } : {}),
        ...(cfg.scittTimeoutMs !== undefined ? { timeoutMs: cfg.scittTimeoutMs } : {}),
      }),
    };
  } else {
    backend = { kind: 'local', log };
  }
  const publisher = createPublisher({
    jobs: cfg.vault.transparencyJobs,
    backend,
    signer: cfg.signer,
    caCertificates: cfg.caCertificates,
    loadAttestation: (id) => cfg.vault.attestations.get(id),
    logger: cfg.logger,
  });
  return { log, publisher, logSigner: cfg.logSigner };
}

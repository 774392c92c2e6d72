import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { RecordingObserver } from '../recorder/index.ts';
import type { Signer } from '../signing/index.ts';
import { ATTESTATION_KINDS } from '../vault/index.ts';

/**
 * The service's own Prometheus metrics (docs/metrics.md is their reference; a test scrapes both
 * processes for every metric it lists). Names follow the Prometheus conventions: the `aibom_vault_`
 * prefix, base units in the name (`_seconds`), `_total` on counters. Every labelled series a
 * dashboard or alert needs exists from the start with the value 0, so `rate()` and absence alerts
 * work before the first event.
 */

export const AIBOM_STATUSES = ['succeeded', 'failed'] as const;
/** SCITT job states: a job is queued until it is published (there is no third state). */
export const JOB_STATES = ['queued', 'published'] as const;
export const LOSS_SOURCES = ['run-status', 'bucket', 'checkpoint'] as const;

/** The controller's counters of what it recorded, and the AIBOM latency histogram. */
export function recordingMetrics(registry: Registry): RecordingObserver & {
  observeAibomSeconds(seconds: number): void;
} {
  const attestations = new Counter({
    name: 'aibom_vault_attestations_recorded_total',
    help: 'Attestations recorded in the vault by this process, by kind',
    labelNames: ['kind'],
    registers: [registry],
  });
  for (const kind of ATTESTATION_KINDS) attestations.inc({ kind }, 0);
  const aiboms = new Counter({
    name: 'aibom_vault_aiboms_recorded_total',
    help: 'AIBOMs built, signed and stored by this process, by the terminal status of their run',
    labelNames: ['status'],
    registers: [registry],
  });
  for (const status of AIBOM_STATUSES) aiboms.inc({ status }, 0);
  const aibomSeconds = new Histogram({
    name: 'aibom_vault_aibom_record_duration_seconds',
    help: "Time from starting a terminal Run's AIBOM to it being recorded (build, sign, C2PA, store)",
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [registry],
  });
  const losses = new Counter({
    name: 'aibom_vault_losses_recorded_total',
    help:
      'Losses of acknowledged records the controller found and wrote down in the vault (docs/failover.md), ' +
      'by where they showed: run-status (a Run status claims records the vault lacks), bucket (an AIBOM ' +
      'whose record is gone), checkpoint (a signed checkpoint the vault tree no longer matches)',
    labelNames: ['source'],
    registers: [registry],
  });
  const lostRecords = new Counter({
    name: 'aibom_vault_lost_records_total',
    help: 'Records named by those losses that the vault no longer holds (recorded again from the Run where it exists)',
    labelNames: ['source'],
    registers: [registry],
  });
  for (const source of LOSS_SOURCES) {
    losses.inc({ source }, 0);
    lostRecords.inc({ source }, 0);
  }
  return {
    recorded: (kind, count) => attestations.inc({ kind }, count),
    aibomRecorded: (status) => aiboms.inc({ status }),
    observeAibomSeconds: (seconds) => aibomSeconds.observe(seconds),
    lossRecorded: (source, records) => {
      losses.inc({ source });
      lostRecords.inc({ source }, records);
    },
  };
}

/** What the transparency gauges read from the vault at scrape time. */
export interface JobStatsSource {
  /** Jobs per state, and the queued ones whose last attempt failed (`retrying`). */
  stats(): Promise<Record<(typeof JOB_STATES)[number] | 'retrying', number>>;
  /** Seconds since the oldest queued job was enqueued; null when none is queued. */
  oldestQueuedAgeSeconds(): Promise<number | null>;
}

/**
 * SCITT jobs by state, the queued ones whose last attempt failed, and the age of the oldest queued
 * one, read from the vault when Prometheus
 * scrapes (the queue is shared by every replica: the values are the deployment's, so aggregate
 * with `max`, not `sum`). A failed read keeps the last values and is reported to `onError`.
 */
export function transparencyMetrics(
  registry: Registry,
  jobs: JobStatsSource,
  onError: (err: unknown) => void,
): void {
  new Gauge({
    name: 'aibom_vault_transparency_jobs',
    help: 'SCITT transparency jobs in the vault, by state (the whole deployment)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      try {
        const stats = await jobs.stats();
        for (const state of JOB_STATES) this.set({ state }, stats[state] ?? 0);
      } catch (err) {
        onError(err);
      }
    },
  });
  new Gauge({
    name: 'aibom_vault_transparency_jobs_retrying',
    help: 'Queued SCITT jobs whose last attempt failed (the job view and the Run condition TransparencyPublished say why)',
    registers: [registry],
    async collect() {
      try {
        this.set((await jobs.stats()).retrying);
      } catch (err) {
        onError(err);
      }
    },
  });
  new Gauge({
    name: 'aibom_vault_transparency_oldest_queued_job_age_seconds',
    help: 'Age of the oldest queued SCITT job (0 when none is queued)',
    registers: [registry],
    async collect() {
      try {
        this.set((await jobs.oldestQueuedAgeSeconds()) ?? 0);
      } catch (err) {
        onError(err);
      }
    },
  });
}

/**
 * Seconds until the signer's certificate expires (notAfter − now; negative once expired), for each
 * signer this process signs with now (read at each scrape, so a rotated Secret shows up without a
 * restart). Keyed by the signer's role and key id.
 */
export function signerMetrics(registry: Registry, signers: Readonly<Record<string, () => Signer>>): void {
  new Gauge({
    name: 'aibom_vault_signer_certificate_expiry_seconds',
    help: "Seconds until the signer certificate's notAfter, by signer role and key id",
    labelNames: ['signer', 'key_id'],
    registers: [registry],
    collect() {
      // Read at every scrape: a watched signer rotates without a restart, and the gauge follows it
      // (only the current key is reported; a retired key's series is dropped).
      this.reset();
      for (const [role, current] of Object.entries(signers)) {
        const s = current();
        const leaf = s.certificateChain?.[0];
        if (leaf) this.set({ signer: role, key_id: s.keyId }, (Date.parse(leaf.validTo) - Date.now()) / 1000);
      }
    },
  });
}

/** Artifact downloads and exports refused by the signed-export guard (the sidecar). */
export function exportMetrics(registry: Registry): { blocked(): void } {
  const blocked = new Counter({
    name: 'aibom_vault_exports_blocked_total',
    help: 'Artifact downloads and exports refused because no valid signed C2PA manifest was stored',
    registers: [registry],
  });
  blocked.inc(0);
  return { blocked: () => blocked.inc() };
}

import { createHash } from 'node:crypto';
import type { BlobStore } from '../blob/store.ts';
import type { LogKey } from '../cose/key.ts';
import type { Logger } from '../log/index.ts';
import { signatureMetadata, type KeySigner } from '../signing/index.ts';
import type { PartitionInfo, Vault } from '../vault/index.ts';
import { writeBundle } from './bundle.ts';
import { ExportError } from './errors.ts';
import { exportSource, type ExportSourceDeps } from './source.ts';

/**
 * Retention of the vault's monthly partitions (docs/vault.md "Retention", migration 0019): a
 * partition whose month ended long enough ago is written to the object store as signed export
 * bundles, the same format as POST /v1/attestations/export (verifiable offline by `service-ctl
 * verify`), then detached from the live table (or dropped, when configured). Nothing is rewritten:
 * the records leave as they are, and the vault's head, tree and signed checkpoints stay and keep
 * proving what the partition held (the database refuses to archive records no checkpoint covers).
 *
 * A partition is written as parts of at most `partSize` records (each a complete bundle, so memory
 * stays bounded however large the month), listed by one JSON index whose key and SHA-256 the vault
 * records with the partition.
 */

export interface RetentionDeps extends ExportSourceDeps {
  readonly vault: ExportSourceDeps['vault'] & Pick<Vault, 'attestations' | 'partitions' | 'checkpoints'>;
  readonly blobs: BlobStore;
  /** The service signer: signs each bundle's manifest. */
  readonly signer: KeySigner;
  /** The transparency logs' keys whose receipts the bundles may hold. */
  readonly logKeys: readonly { key: LogKey; chainPem?: string }[];
  /** Records the service's keys in the key store before anything they signed leaves. */
  readonly ensureServiceKeys: () => Promise<void>;
  /** `name/version` of the service. */
  readonly claimGenerator: string;
  readonly logger?: Logger;
}

export interface RetentionOptions {
  /** Partitions whose month ended at least this many whole months before the current one. */
  readonly months: number;
  /** Drop the detached tables too (VAULT_RETENTION_DROP); default keep them. */
  readonly drop?: boolean;
  /** Object key prefix of the archives (VAULT_ARCHIVE_PREFIX). */
  readonly prefix?: string;
  /** Records per bundle (default 50,000). */
  readonly partSize?: number;
  readonly now?: Date;
}

export interface ArchivedPartition {
  readonly name: string;
  readonly records: number;
  /** Key of the archive index ('' when the partition held no record). */
  readonly key: string;
  readonly digest: string | null;
  readonly parts: readonly ArchivePart[];
  readonly state: 'detached' | 'dropped';
}

export interface ArchivePart {
  readonly key: string;
  readonly digest: string;
  readonly records: number;
  readonly first_id: string;
  readonly last_id: string;
  readonly first_seq: number;
  readonly last_seq: number;
}

export const ARCHIVE_INDEX_TYPE = 'https://vault.service.dev/archive/v1';
const DEFAULT_PART_SIZE = 50_000;

/** The attached partitions whose month ended `months` whole months (or more) before `now`'s month. */
export function duePartitions(parts: readonly PartitionInfo[], months: number, now: Date): PartitionInfo[] {
  if (!Number.isInteger(months) || months < 0)
    throw new RangeError('retention months must be an integer ≥ 0');
  const cutoff = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - months, 1);
  return parts.filter(
    (p) => p.state === 'attached' && p.to.getTime() <= cutoff && p.to.getTime() <= now.getTime(),
  );
}

/** Archives and detaches every due partition, oldest first; returns what it did. */
export async function retainPartitions(
  deps: RetentionDeps,
  options: RetentionOptions,
): Promise<ArchivedPartition[]> {
  const now = options.now ?? new Date();
  const parts = await deps.vault.partitions.list();
  const done: ArchivedPartition[] = [];
  // Archived by an earlier round whose detach was refused (jobs still queued, migration 0020):
  // the bundles are written; only the detach is left.
  for (const p of parts.filter((x) => x.state === 'archived'))
    done.push(await detachArchived(deps, p, options));
  for (const p of duePartitions(parts, options.months, now))
    done.push(await archivePartition(deps, p, options));
  return done;
}

async function detachArchived(
  deps: RetentionDeps,
  p: PartitionInfo,
  options: Omit<RetentionOptions, 'months' | 'now'>,
): Promise<ArchivedPartition> {
  const drop = options.drop ?? false;
  await assertNoQueuedJobs(deps, p);
  await deps.vault.partitions.detach(p.name, drop);
  deps.logger?.info({ partition: p.name, key: p.archiveKey, drop }, 'vault partition detached');
  return {
    name: p.name,
    records: p.records ?? 0,
    key: p.archiveKey ?? '',
    digest: p.archiveDigest,
    parts: [],
    state: drop ? 'dropped' : 'detached',
  };
}

/**
 * The month's job partitions leave with its records (migration 0020); a bundle holds each record's
 * receipt and time-stamp but not a queue's pending work, so a month with queued jobs waits. Checked
 * again by the database at the detach; here so that nothing is written first.
 */
async function assertNoQueuedJobs(deps: RetentionDeps, p: PartitionInfo): Promise<void> {
  const q = await deps.vault.partitions.queuedJobs(p);
  if (q.transparency > 0 || q.timestamp > 0) {
    throw new ExportError(
      'ARCHIVE_JOBS_QUEUED',
      `partition ${p.name}: ${q.transparency} SCITT and ${q.timestamp} time-stamp jobs of its month are ` +
        'still queued; it retires once they are done',
    );
  }
}

/** Writes one partition's bundles and index, records the archive, then detaches it. */
export async function archivePartition(
  deps: RetentionDeps,
  p: PartitionInfo,
  options: Omit<RetentionOptions, 'months' | 'now'> = {},
): Promise<ArchivedPartition> {
  const drop = options.drop ?? false;
  const prefix = options.prefix ?? 'vault-archive/';
  const partSize = options.partSize ?? DEFAULT_PART_SIZE;
  if (!Number.isInteger(partSize) || partSize < 1) throw new RangeError('partSize must be ≥ 1');
  await assertNoQueuedJobs(deps, p);
  const bounds = await deps.vault.partitions.bounds(p);
  const parts: ArchivePart[] = [];
  let key = '';
  let digest: string | null = null;
  let records = 0;
  if (bounds !== null) {
    // Checked again by the database; here so that nothing is written first.
    const covered = (await deps.vault.checkpoints.get())?.treeSize ?? 0;
    const lastSeq = (await deps.vault.attestations.get(bounds.last))?.seq ?? Infinity;
    if (lastSeq > covered) {
      throw new ExportError(
        'ARCHIVE_NOT_CHECKPOINTED',
        `partition ${p.name} ends at seq ${lastSeq} but the newest signed checkpoint covers ${covered}: ` +
          'a checkpoint must cover every record before it leaves the vault',
      );
    }
    await deps.ensureServiceKeys();
    const namespaces = await deps.vault.attestations.namespaces();
    // Part boundaries: every partSize-th record of the range, in id order.
    let after: string | null = p.lo;
    while (after !== bounds.last) {
      const part = await writePart(deps, p, {
        namespaces,
        after,
        last: bounds.last,
        partSize,
        prefix,
        index: parts.length,
      });
      parts.push(part);
      records += part.records;
      after = part.last_id;
    }
    if (records !== bounds.count) {
      throw new ExportError(
        'BUNDLE_INVALID',
        `partition ${p.name}: wrote ${records} records of ${bounds.count}`,
      );
    }
    const index = Buffer.from(
      JSON.stringify(
        {
          type: ARCHIVE_INDEX_TYPE,
          partition: {
            name: p.name,
            lo: p.lo,
            hi: p.hi,
            from: p.from?.toISOString() ?? null,
            to: p.to.toISOString(),
          },
          records,
          parts,
        },
        null,
        2,
      ) + '\n',
    );
    key = `${prefix}${p.name}/index.json`;
    digest = sha256(index);
    await deps.blobs.put(key, index, 'application/json', { kind: 'vault-archive-index', partition: p.name });
  }
  await deps.vault.partitions.archived(p.name, {
    records,
    firstSeq: parts[0]?.first_seq ?? null,
    lastSeq: parts.at(-1)?.last_seq ?? null,
    key,
    digest,
  });
  await deps.vault.partitions.detach(p.name, drop);
  deps.logger?.info(
    { partition: p.name, records, key, parts: parts.length, drop },
    'vault partition archived and detached',
  );
  return { name: p.name, records, key, digest, parts, state: drop ? 'dropped' : 'detached' };
}

async function writePart(
  deps: RetentionDeps,
  p: PartitionInfo,
  at: {
    namespaces: string[];
    after: string | null;
    last: string;
    partSize: number;
    prefix: string;
    index: number;
  },
): Promise<ArchivePart> {
  const span = await deps.vault.partitions.span(at.after, at.last, at.partSize);
  if (span === null) {
    throw new ExportError(
      'BUNDLE_INVALID',
      `partition ${p.name}: no record after ${at.after ?? 'its start'}`,
    );
  }
  const source = exportSource(
    deps,
    { namespaces: at.namespaces },
    {
      until: span.lastId,
      after: at.after,
      enqueueScitt: false,
      actor: 'vault-retention',
      audience: { positions: true },
    },
  );
  const chunks: Buffer[] = [];
  for await (const chunk of writeBundle({
    segments: source.segments(),
    logKeys: deps.logKeys,
    service: {
      name: deps.claimGenerator.split('/')[0],
      version: deps.claimGenerator.split('/')[1],
      signer: signatureMetadata(deps.signer),
    },
    selection: { partition: p.name, after: at.after, until: span.lastId, part: at.index },
    signer: deps.signer.deterministic(),
    claimGenerator: deps.claimGenerator,
  })) {
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  const key = `${at.prefix}${p.name}/part-${String(at.index).padStart(5, '0')}.tar`;
  await deps.blobs.put(key, bytes, 'application/x-tar', { kind: 'vault-archive', partition: p.name });
  return {
    key,
    digest: sha256(bytes),
    records: span.count,
    first_id: span.firstId,
    last_id: span.lastId,
    first_seq: span.firstSeq,
    last_seq: span.lastSeq,
  };
}

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

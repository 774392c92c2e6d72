import type { Run } from '../crd/run.ts';
import type { ArtifactRecord, NewLoss } from '../vault/index.ts';
import type { SupersededAibom } from './aibom.ts';

/**
 * Lost records, found by comparing what a Run's status says is recorded with what the vault holds
 * (pure). The controller writes a Run's status only after the records it counts have committed, and
 * records are never removed, so a status that claims more than the vault holds means the database
 * lost acknowledged writes: an asynchronous standby promoted without the last transactions, or a
 * restore from an older backup (docs/failover.md). Costs nothing: the reconciler has read both.
 */

/** What a Run's status claims the vault holds for it. */
export interface RunClaim {
  /** `status.attestations.count`: records that existed when the status was written. */
  readonly count: number;
  /** Ids the status names: the run and AIBOM records, and every record the AIBOM names. */
  readonly ids: readonly string[];
  /** The AIBOM the status shows (its metadata record), if any. */
  readonly aibom: { readonly digest: string; readonly metadata: Record<string, unknown> } | null;
}

export interface RecordLoss {
  readonly runId: string;
  readonly namespace: string;
  readonly claim: RunClaim;
  /** Records of the Run the vault holds. */
  readonly held: number;
  /** Ids the status names that the vault does not hold (dangling references). */
  readonly missingIds: readonly string[];
  /** The status shows an AIBOM the vault has no record of (none, or another one). */
  readonly aibomLost: boolean;
}

const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** The claim of a Run's status (empty when it shows nothing recorded). */
export function claimOf(run: Run): RunClaim {
  const a = run.status?.attestations;
  const meta = run.status?.artifacts?.aibom as Record<string, unknown> | undefined;
  const named = [
    a?.runAttestationId,
    a?.aibomAttestationId,
    meta?.aibom_attestation_id,
    meta?.blob_attestation_id,
    ...(Array.isArray(meta?.attestation_ids) ? (meta.attestation_ids as unknown[]) : []),
    ...viewRecordIds(meta?.views),
  ].filter(isId);
  const digest = meta?.digest;
  return {
    count: typeof a?.count === 'number' ? a.count : 0,
    ids: [...new Set(named.map((id) => id.toLowerCase()))].sort(),
    aibom: typeof digest === 'string' && meta !== undefined ? { digest, metadata: meta } : null,
  };
}

/** The standard views' records the AIBOM metadata names (`views.<format>.attestation_id`). */
export function viewRecordIds(views: unknown): unknown[] {
  if (typeof views !== 'object' || views === null) return [];
  return Object.values(views as Record<string, unknown>).map((v) =>
    typeof v === 'object' && v !== null ? (v as { attestation_id?: unknown }).attestation_id : undefined,
  );
}

/**
 * What the Run's status claims and the vault (`held`: its records of the Run, its AIBOM record)
 * does not hold; null when nothing. A vault ahead of the status is normal (records commit before
 * the status is written) and is no loss.
 */
export function lostRecords(
  run: Run,
  held: { readonly attestations: readonly { readonly id: string }[]; readonly aibom: ArtifactRecord | null },
): RecordLoss | null {
  const claim = claimOf(run);
  const ids = new Set(held.attestations.map((r) => r.id.toLowerCase()));
  const missingIds = claim.ids.filter((id) => !ids.has(id));
  const aibomLost = claim.aibom !== null && held.aibom?.digest !== claim.aibom.digest;
  if (claim.count <= held.attestations.length && missingIds.length === 0 && !aibomLost) return null;
  return {
    runId: run.metadata.uid,
    namespace: run.metadata.namespace,
    claim,
    held: held.attestations.length,
    missingIds,
    aibomLost,
  };
}

/**
 * The row that records `loss` in the vault. Its identity is the claim alone (not the vault's side,
 * which changes while the loss is repaired): seen again before the status is rewritten, it is the
 * same loss.
 */
export function lossRow(loss: RecordLoss, detectedBy: string): NewLoss {
  return {
    scope: 'run',
    namespace: loss.namespace,
    runId: loss.runId,
    missingIds: loss.missingIds,
    identity: {
      source: 'run-status',
      run: loss.runId,
      count: loss.claim.count,
      ids: loss.claim.ids,
      aibom: loss.claim.aibom?.digest ?? null,
    },
    details: {
      source: 'run-status',
      claimed: {
        count: loss.claim.count,
        ids: loss.claim.ids,
        ...(loss.claim.aibom ? { aibom: loss.claim.aibom.metadata } : {}),
      },
      held: loss.held,
      aibom_lost: loss.aibomLost,
    },
    detectedBy,
  };
}

/** How every loss sentence ends: what was done, and what cannot be undone. */
const REPAIRED =
  '. Recorded again from the Run; the lost ids stay unresolvable wherever they were handed out ' +
  '(the earlier AIBOM, its C2PA manifest, exports, receipts), and a new AIBOM supersedes the lost one ' +
  '(docs/failover.md)';

/** The first ids a loss names, for its sentence (empty when none). */
function goneIds(ids: readonly string[]): string {
  if (ids.length === 0) return '';
  return `; ids no longer in the vault: ${ids.slice(0, 8).join(', ')}${ids.length > 8 ? ', …' : ''}`;
}

/** One sentence for the Run's condition and Event: what was lost, what is done, what cannot be. */
export function lossMessage(loss: RecordLoss, lossId: string): string {
  const lost = Math.max(loss.claim.count - loss.held, loss.missingIds.length);
  return (
    `the vault lost ${lost} acknowledged record(s) of this run (loss ${lossId}: the status showed ` +
    `${loss.claim.count}, the vault holds ${loss.held})` +
    goneIds(loss.missingIds) +
    (loss.aibomLost && loss.claim.aibom ? `; AIBOM ${loss.claim.aibom.digest} has no record any more` : '') +
    REPAIRED
  );
}

/** What a loss sentence needs of the lost AIBOM an AIBOM supersedes (its metadata's `supersedes`). */
export type SupersededLoss = Pick<SupersededAibom, 'digest' | 'loss_id' | 'lost_attestation_ids'>;

/**
 * The loss an AIBOM record names (`supersedes`), when it supersedes one the vault lost; null
 * otherwise. The record is in the vault, so the loss stays known when only the bucket showed it
 * (the status naming the lost AIBOM was never written) and the reconcile that found it could not
 * say it on the Run.
 */
export function supersededLoss(aibom: ArtifactRecord | null): SupersededLoss | null {
  const s = (aibom?.metadata as { supersedes?: Partial<SupersededLoss> } | undefined)?.supersedes;
  if (typeof s?.digest !== 'string' || typeof s.loss_id !== 'string') return null;
  return {
    digest: s.digest,
    loss_id: s.loss_id,
    lost_attestation_ids: Array.isArray(s.lost_attestation_ids) ? s.lost_attestation_ids : [],
  };
}

/** The sentence of a loss only the bucket showed (an AIBOM whose record the vault lost), as lossMessage's. */
export function supersededMessage(s: SupersededLoss): string {
  return (
    `the vault lost the record of this run's AIBOM ${s.digest} (loss ${s.loss_id}: its metadata copy ` +
    `was found in the bucket)` +
    goneIds(s.lost_attestation_ids) +
    REPAIRED
  );
}

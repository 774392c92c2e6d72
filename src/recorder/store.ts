import type { Run } from '../crd/run.ts';
import type { CapabilityPredicate, CapabilityRoot } from '../attest/index.ts';
import { CapabilityError } from '../capability/errors.ts';
import { mintGrants, rootOf } from '../capability/mint.ts';
import type { Signer } from '../signing/index.ts';
import type { EnvelopeSigner } from '../signing/namespace-signers.ts';
import { rememberSigner } from '../export/keys.ts';
import type { ClaimedAppendOptions, NewAttestation } from '../vault/index.ts';
import { because, RecordError } from './errors.ts';
import type { Batch } from './extract.ts';
import type { Recorded, RecorderDeps } from './index.ts';
import { appendOnce } from './once.ts';
import { sealBatch } from './seal.ts';

/**
 * Files `signer`'s chain in the key store before its first record is stored (so every stored
 * record's key resolves). The service's keys are filed under the service ('' namespace), a tenant's
 * own under its namespace: as the envelope signer said when it chose the key (never guessed afterwards).
 */
export async function rememberKey(
  deps: Pick<RecorderDeps, 'signers'>,
  signer: Signer,
  namespace: string,
  authority: EnvelopeSigner['authority'],
): Promise<void> {
  const signers = deps.signers;
  if (signers === undefined) return;
  const scope = authority === 'service' ? '' : namespace;
  await because('VaultUnavailable', () =>
    rememberSigner(signers, signer, { namespace: scope, role: 'signer' }),
  );
}

/**
 * Extract (with the chain root: the namespace's envelope signer) → sign → store once. A step
 * batch's capability records carry their chains; the grants (chain views and minted tokens)
 * commit in the same transaction as the records, so nothing is stored half-way.
 */
export async function storeBatch(
  deps: RecorderDeps,
  run: Run,
  build: (root: CapabilityRoot) => Batch,
  what: string,
): Promise<Recorded> {
  const namespace = run.metadata.namespace;
  const { signer, authority } = await because('SignerUnavailable', () => deps.envelopeSigner(namespace));
  await rememberKey(deps, signer, namespace, authority);
  const root = await because('SignerUnavailable', () => rootOf(signer, authority));
  const batch = extract(build, root, what);
  const records = sealBatch(batch.items, signer);
  const grants = grantsOf(signer, batch, records, deps.capabilityTokens !== false);
  const { ids, created } = await because('VaultUnavailable', () =>
    appendOnce(deps.vault.claims, batch.key, records, {
      enqueueTransparency: deps.enqueueTransparency === true,
      // TSA_URL: each record's signature is time-stamped right after it is stored (ADR 0015).
      enqueueTimestamps: deps.timestamper !== undefined,
      ...(grants !== undefined ? { grants } : {}),
    }),
  );
  if (created) for (const r of records) deps.observer?.recorded(r.kind, 1);
  return { key: batch.key, what, ids, created };
}

/** The batch `build` makes; a capability chain it refuses is CapabilityChainInvalid, named by `what`. */
function extract(build: (root: CapabilityRoot) => Batch, root: CapabilityRoot, what: string): Batch {
  try {
    return build(root);
  } catch (err) {
    if (err instanceof CapabilityError)
      throw new RecordError('CapabilityChainInvalid', `${what}: ${err.message}`, { cause: err });
    throw err;
  }
}

/**
 * The grants of a step batch's capability records (chain views and, with `tokens`, the minted VC and
 * Biscuit projections), made from the records as inserted; undefined for a batch without
 * capabilities or without a step record.
 */
function grantsOf(
  signer: Signer,
  batch: Batch,
  records: readonly NewAttestation[],
  tokens: boolean,
): ClaimedAppendOptions['grants'] {
  const capabilities = batch.items.flatMap((item, i) =>
    item.meta.kind === 'capability'
      ? [{ digest: records[i]!.digest, predicate: item.statement.predicate as CapabilityPredicate }]
      : [],
  );
  const stepDigest = records.find((r) => r.kind === 'step')?.digest;
  if (capabilities.length === 0 || stepDigest === undefined) return undefined;
  return (inserted) => {
    const byDigest = new Map(inserted.map((r) => [r.digest, r]));
    const step = byDigest.get(stepDigest);
    if (step === undefined) return Promise.resolve([]);
    return mintGrants(
      signer,
      capabilities.flatMap((c) => {
        const record = byDigest.get(c.digest);
        return record ? [{ record, predicate: c.predicate }] : [];
      }),
      step,
      { tokens },
    );
  };
}

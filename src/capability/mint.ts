import type { CapabilityPredicate, CapabilityRoot } from '../attest/index.ts';
import type { Signer } from '../signing/index.ts';
import type { CapabilityToken, NewCapabilityGrant, StoredAttestation } from '../vault/index.ts';
import { biscuitRootKey, mintBiscuit } from './biscuit.ts';
import { chainView } from './view.ts';
import { mintCredential } from './vc.ts';
import { InvariantError } from '../errors.ts';

/**
 * Minting, once, at record time: the tokens carry the vault ids of the records they project (the
 * VC's `evidence`, the Biscuit's `attestation` facts), so they are made inside the append that
 * assigns those ids and stored beside them. A token minted at read time would differ on every read
 * (ECDSA and Biscuit's block keys are randomised) and could not be cited or revoked by id
 * (docs/adr/0010-capability-tokens.md).
 */

/** How long a token is valid from its record's time (docs/capabilities.md). */
export const TOKEN_LIFETIME_MS = 365 * 24 * 60 * 60 * 1000;

/** The chain root of a signer: the predicate's `root`. */
export async function rootOf(
  signer: Signer,
  authority: CapabilityRoot['authority'],
): Promise<CapabilityRoot> {
  return {
    keyId: signer.keyId,
    algorithm: signer.algorithm,
    authority,
    biscuitRootKey: await biscuitRootKey(signer),
  };
}

/** A capability record of a batch, as stored, with the predicate it signs. */
export interface StoredCapability {
  readonly record: StoredAttestation;
  readonly predicate: CapabilityPredicate;
}

/**
 * The grant rows of a step batch: per capability record, its chain view and (with `tokens`) a
 * VC-JWT and a Biscuit signed by `signer` (the envelope signer, the chain's root). Validity starts
 * at the capability record's `createdAt`.
 */
export async function mintGrants(
  signer: Signer,
  capabilities: readonly StoredCapability[],
  step: StoredAttestation,
  options: { tokens: boolean; lifetimeMs?: number },
): Promise<NewCapabilityGrant[]> {
  const out: NewCapabilityGrant[] = [];
  for (const { record, predicate } of capabilities) {
    const root = predicate.root;
    // A stored capability predicate always has a root (the schema requires one).
    if (root === undefined) throw new InvariantError(`capability ${record.id} has no root`);
    const capabilityId = `capability:${predicate.runId}:${predicate.stepId}:${predicate.index}`;
    const stepSubject = `step:${predicate.runId}:${predicate.stepId}`;
    const validFrom = record.createdAt;
    const validUntil = new Date(validFrom.getTime() + (options.lifetimeMs ?? TOKEN_LIFETIME_MS));
    const tokens: CapabilityToken[] = [];
    if (options.tokens) {
      const vc = mintCredential(
        signer,
        {
          namespace: record.namespace,
          runId: predicate.runId,
          stepId: predicate.stepId,
          step: stepSubject,
          capability: capabilityId,
          authority: root.authority,
          biscuitRootKey: root.biscuitRootKey,
          links: predicate.chain,
          evidence: [
            { id: record.id, kind: 'capability', digest: record.digest, predicateType: record.predicateType },
            { id: step.id, kind: 'step', digest: step.digest, predicateType: step.predicateType },
          ],
          validFrom,
          validUntil,
        },
        record.id,
      );
      tokens.push({ format: 'vc+jwt', id: vc.id, token: vc.token });
      const biscuit = await mintBiscuit(signer, {
        namespace: record.namespace,
        runId: predicate.runId,
        step: stepSubject,
        capability: capabilityId,
        attestations: [record.id, step.id],
        links: predicate.chain,
        validUntil,
      });
      tokens.push({ format: 'biscuit', id: biscuit.id, token: biscuit.token });
    }
    out.push({
      capabilityAttestationId: record.id,
      stepAttestationId: step.id,
      namespace: record.namespace,
      capabilityId,
      chain: chainView(predicate),
      tokens,
      publicKey: signer.publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      biscuitRootKey: root.biscuitRootKey,
    });
  }
  return out;
}

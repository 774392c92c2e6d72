import { capabilityStatement, stepStatement, type CapabilityLink } from '../../src/attest/index.ts';
import { loadBiscuit } from '../../src/capability/biscuit.ts';
import { mintGrants, rootOf } from '../../src/capability/mint.ts';
import { toApiEnvelope, type ApiEnvelope } from '../../src/http/views/envelope.ts';
import { sealRecord } from '../../src/recorder/index.ts';
import type { Signer } from '../../src/signing/index.ts';
import type { NewAttestation, StoredAttestation } from '../../src/vault/index.ts';

export const RUN_ID = '0190a5c8-1234-7abc-8def-0123456789ab';
export const CHAIN: CapabilityLink[] = [
  { scope: 'kb', grantedBy: 'org:acme-it', approvedBy: 'user:ciso' },
  { scope: 'kb:read', grantedBy: 'team:support-platform', approvedBy: 'user:alice' },
];

let seq = 0;
const uuid7 = (n: number) => `0190a5c8-${String(n).padStart(4, '0')}-7abc-8def-0123456789ab`;

function stored(r: NewAttestation, createdAt: Date): StoredAttestation {
  seq += 1;
  return {
    id: uuid7(seq),
    seq,
    namespace: r.namespace,
    runId: r.runId ?? null,
    stepId: r.stepId ?? null,
    kind: r.kind,
    subjects: [...r.subjects],
    artifactDigests: [],
    predicateType: r.predicateType,
    policyPack: null,
    policyVersion: null,
    capabilityTokenIds: [...(r.capabilityTokenIds ?? [])],
    envelope: r.envelope,
    digest: r.digest,
    prevDigest: `sha256:${'0'.repeat(64)}`,
    signature: r.signature,
    c2paManifestRef: null,
    createdAt,
  };
}

/**
 * A capability record and the step record it authorised, as the API serves them (with their chain
 * views and minted tokens), signed by `signer` — the recorder's path without PostgreSQL. `chain` is
 * signed as given (a widened chain is what a forged or buggy signer would produce).
 */
export async function capabilityEnvelopes(
  signer: Signer,
  options: {
    chain?: CapabilityLink[];
    namespace?: string;
    createdAt?: Date;
    lifetimeMs?: number;
    tokensSigner?: Signer;
  } = {},
): Promise<{ capability: ApiEnvelope; step: ApiEnvelope }> {
  const namespace = options.namespace ?? 'demo';
  const createdAt = options.createdAt ?? new Date();
  const root = await rootOf(signer, 'service');
  const cap = capabilityStatement({
    runId: RUN_ID,
    stepId: 'retrieve',
    index: 0,
    chain: options.chain ?? CHAIN,
    root,
  });
  const step = stepStatement({
    runId: RUN_ID,
    stepId: 'retrieve',
    kind: 'tool',
    tool: { name: 'vector-search', command: [] },
    inputs: {},
    output: { hits: 5 },
    phase: 'succeeded',
    startedAt: '2026-01-01T00:00:00Z',
    finishedAt: '2026-01-01T00:00:01Z',
    policyPack: { name: 'baseline', version: '1' },
  });
  const meta = { namespace, runId: RUN_ID, stepId: 'retrieve' };
  const capRecord = stored(sealRecord(cap, signer, { ...meta, kind: 'capability' }), createdAt);
  const stepRecord = stored(sealRecord(step, signer, { ...meta, kind: 'step' }), createdAt);
  const [grant] = await mintGrants(
    options.tokensSigner ?? signer,
    [{ record: capRecord, predicate: cap.predicate }],
    stepRecord,
    { tokens: true, ...(options.lifetimeMs !== undefined ? { lifetimeMs: options.lifetimeMs } : {}) },
  );
  const withGrant = (a: StoredAttestation): StoredAttestation => ({
    ...a,
    capabilityChains: [grant!.chain],
    capabilityTokens: grant!.tokens,
  });
  return { capability: toApiEnvelope(withGrant(capRecord)), step: toApiEnvelope(withGrant(stepRecord)) };
}

/** The token of `format` in an envelope. */
export function tokenOf(envelope: ApiEnvelope, format: 'vc+jwt' | 'biscuit'): string {
  const t = envelope.capability_tokens?.find((x) => x.format === format);
  if (t === undefined) throw new Error(`no ${format} token`);
  return t.token;
}

/** The envelope with one token replaced. */
export function withToken(envelope: ApiEnvelope, format: 'vc+jwt' | 'biscuit', token: string): ApiEnvelope {
  const copy: ApiEnvelope = {
    ...envelope,
    capability_tokens: envelope.capability_tokens!.map((t) => (t.format === format ? { ...t, token } : t)),
  };
  return copy;
}

/**
 * What any holder of a Biscuit can do without a key: append an attenuation block (Datalog
 * `source`, e.g. a check that narrows the operations). Verified under `rootKey` first.
 */
export async function appendBiscuitBlock(token: string, rootKey: string, source: string): Promise<string> {
  const b = await loadBiscuit();
  const hex = rootKey.replace(/^ed25519\//, '');
  const parsed = b.Biscuit.fromBase64(token, b.PublicKey.fromString(hex, b.SignatureAlgorithm.Ed25519));
  const block = new b.BlockBuilder();
  block.addCode(source);
  return parsed.appendBlock(block).toBase64();
}

/** The Biscuit root key a capability or step record's chain view names. */
export function biscuitRootOf(envelope: ApiEnvelope): string {
  return (envelope.capability_chain![0] as { root: { biscuit_root_key: string } }).root.biscuit_root_key;
}

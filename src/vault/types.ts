/** Kinds of attestation the vault stores (a CHECK constraint holds the same list). */
export const ATTESTATION_KINDS = ['run', 'step', 'artifact', 'policy', 'capability', 'aibom'] as const;
export type AttestationKind = (typeof ATTESTATION_KINDS)[number];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Digest of the chain's first link: `sha256:` followed by 64 zeros. */
export const GENESIS_DIGEST = `sha256:${'0'.repeat(64)}`;

/**
 * Who signed the envelope, stored verbatim in the `signature` JSONB column. Snake case on purpose:
 * it is the shape of src/signing's `SignatureMetadata` and of the API's signature metadata.
 */
export interface SignatureMeta {
  readonly algorithm: string;
  readonly key_id: string;
  /** Reference to the signer's certificate chain (`sha256:<hex>` of the leaf); absent for bare keys. */
  readonly cert_chain_ref?: string | null;
}

/**
 * A DSSE envelope as stored (JSONB). Structurally the same as src/attest's `DsseEnvelope`, which
 * the vault does not import (it stores envelopes, it does not make them).
 */
export interface DsseEnvelope {
  payload: string;
  payloadType: string;
  signatures: { keyid: string; sig: string }[];
}

/**
 * One attestation to append. The vault assigns `id`, `seq`, `prevDigest` and `createdAt` inside
 * the append critical section; nothing the caller signs may depend on them (the DSSE envelope and
 * its in-toto statement never contain the vault id).
 */
export interface NewAttestation {
  readonly namespace: string;
  readonly runId?: string | null;
  readonly stepId?: string | null;
  readonly kind: AttestationKind;
  /** `run:<run_id>`, `step:<run_id>:<step_id>`, `artifact:<run_id>:<name>`, `policy:<pack>@<version>`. */
  readonly subjects: readonly string[];
  /** `sha256:<hex>` digests of the artifacts the statement is about. */
  readonly artifactDigests?: readonly string[];
  readonly predicateType: string;
  readonly policyPack?: string | null;
  readonly policyVersion?: string | null;
  readonly capabilityTokenIds?: readonly string[];
  /** The signed DSSE envelope. It never contains the vault id, which is assigned at insert. */
  readonly envelope: DsseEnvelope;
  /** `sha256:<hex>` of the RFC 8785 canonical JSON of `envelope`, computed by the caller. */
  readonly digest: string;
  readonly signature: SignatureMeta;
  readonly c2paManifestRef?: string | null;
}

/** One projection of a capability chain, minted once at record time. */
export interface CapabilityToken {
  /** `vc+jwt` (W3C VC 2.0, VC-JOSE-COSE) or `biscuit` (Biscuit v3, base64url). */
  readonly format: 'vc+jwt' | 'biscuit';
  /** The VC's `id`, or the Biscuit's first revocation id (hex). */
  readonly id: string;
  readonly token: string;
}

/**
 * The chain of authority and the tokens of one capability record (table capability_grants),
 * written in the transaction that appends the capability and its step.
 */
export interface NewCapabilityGrant {
  readonly capabilityAttestationId: string;
  readonly stepAttestationId: string;
  readonly namespace: string;
  /** `capability:<run>:<step>:<n>` */
  readonly capabilityId: string;
  /** The API view of the chain (src/capability/view.ts); stored as given. */
  readonly chain: JsonObject;
  readonly tokens: readonly CapabilityToken[];
  /** SPKI DER (base64) of the root signer's public key. */
  readonly publicKey: string;
  /** `ed25519/<hex>` */
  readonly biscuitRootKey: string;
}

/** A grant as records carry it on reads: its chain view and tokens. */
export interface CapabilityGrantView {
  readonly chain: JsonObject;
  readonly tokens: readonly CapabilityToken[];
}

/**
 * The RFC 3161 time-stamp of a record's signature (table attestation_timestamps, migration 0013),
 * taken right after the record was stored (src/timestamp/stamper.ts).
 */
export interface StoredTimestamp {
  /** The token's genTime: when the TSA saw the signature. */
  readonly genTime: Date;
  /** Subject of the TSA certificate, one line. */
  readonly tsa: string;
  /** TSTInfo serial number, hex. */
  readonly serial: string;
  /** The DER TimeStampResp over the raw bytes of the envelope's first signature. */
  readonly response: Buffer;
}

export interface StoredAttestation {
  /** UUIDv7, strictly increasing with `seq`. */
  readonly id: string;
  /** Insert order, gapless from 1. */
  readonly seq: number;
  readonly namespace: string;
  readonly runId: string | null;
  readonly stepId: string | null;
  readonly kind: AttestationKind;
  readonly subjects: readonly string[];
  readonly artifactDigests: readonly string[];
  readonly predicateType: string;
  readonly policyPack: string | null;
  readonly policyVersion: string | null;
  readonly capabilityTokenIds: readonly string[];
  readonly envelope: DsseEnvelope;
  readonly digest: string;
  /** Digest of the row before this one in `seq` order ({@link GENESIS_DIGEST} for seq 1). */
  readonly prevDigest: string;
  readonly signature: SignatureMeta;
  /**
   * What was stored with the record (the AIBOM record's original sidecar key, `s3://…`): internal,
   * never served. The API's `c2pa_manifest_ref` comes from {@link stapled}.
   */
  readonly c2paManifestRef: string | null;
  /**
   * True when the C2PA manifest of the run's AIBOM staples this record: the manifest lists its id
   * (every record of the run stored before the AIBOM), or it is the AIBOM's own record or the
   * artifact record of the AIBOM bytes. Known at read time only (the AIBOM is made after the
   * records it staples, which are immutable): set by every read of the vault (stapled.ts).
   */
  readonly stapled?: boolean;
  /** Millisecond precision; non-decreasing with `seq`. */
  readonly createdAt: Date;
  /**
   * Capability and step records with grants: the chain views of the capability (one) or of the
   * step's capabilities (in record order); undefined for records without grants and other kinds.
   */
  readonly capabilityChains?: readonly JsonObject[];
  /**
   * The tokens of those chains, in the same order (empty when minted with the projection off);
   * undefined with the chains, and for every record when the vault is opened with
   * `capabilityTokens: false` (the projection is switched off).
   */
  readonly capabilityTokens?: readonly CapabilityToken[];
  /** The signature's RFC 3161 time-stamp, once the stamper took it; absent before (and without a TSA). */
  readonly timestamp?: StoredTimestamp;
}

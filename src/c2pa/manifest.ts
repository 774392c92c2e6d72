import { hash, randomUUID } from 'node:crypto';
import type { Signer } from '../signing/index.ts';
import { encodeCbor } from '../cose/cbor.ts';
import { claimTimestampData, signClaim } from './claim-signature.ts';
import { C2paError } from './errors.ts';
import { encodeBox, encodeSuperBox, superBoxPayload, Uuids } from './jumbf.ts';
import {
  ACTIONS_LABEL,
  ASSERTION_STORE_LABEL,
  ATTESTATIONS_LABEL,
  CLAIM_LABEL,
  DATA_HASH_LABEL,
  DATA_HASH_NAME,
  DIGITAL_SOURCE_TYPE,
  HASH_ALG,
  SIGNATURE_LABEL,
  SIGNATURE_URI,
  STORE_LABEL,
  assertionUri,
} from './labels.ts';

export interface BuildManifestInput {
  /** The exact bytes of the artifact the manifest is bound to (the AIBOM JSON). */
  asset: Buffer;
  /**
   * SHA-256 of `asset`, when the caller hashed it already (a streamed export bundle, whose bytes
   * are never in memory at once: pass an empty `asset` then).
   */
  assetSha256?: Buffer;
  /** `dc:format` of the claim, e.g. `application/json`. */
  mimeType: string;
  /** `dc:title`, e.g. `aibom-<run>.json`. */
  title: string;
  /** ES256 (P-256) or Ed25519 signer with an X.509 chain whose leaf C2PA validators accept. */
  signer: Signer;
  /** Attestation UUIDs the manifest links to the artifact, in order. */
  attestationIds: readonly string[];
  runId: string;
  /** `name/version`, e.g. `aibom-vault/0.1.0`; also split into `claim_generator_info`. */
  claimGenerator: string;
  /** `instanceID` of the claim; default `xmp:iid:<random uuid>`. */
  instanceId?: string;
  /** Label of the manifest (`urn:uuid:<uuid>`); default a random one. */
  manifestLabel?: string;
  /** Creation time recorded in the `c2pa.created` action; default now. */
  time?: Date;
}

export interface BuiltManifest {
  /** The JUMBF manifest store (`application/c2pa`), stored as the `.c2pa` sidecar. */
  store: Buffer;
  /** Label of the (only, hence active) manifest: `urn:uuid:<uuid>`. */
  manifestLabel: string;
  /** `sha256:<hex>` of `store`, what audit logs and metadata record. */
  digest: string;
  instanceId: string;
}

/** The custom assertion body (CBOR). Snake case like the rest of the vault's wire formats. */
export interface AttestationsAssertion {
  run_id: string;
  attestation_ids: string[];
}

const GENERATOR = /^([A-Za-z0-9][A-Za-z0-9._-]*)\/([0-9A-Za-z.+-]+)$/;
const MIME = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/i;

function invalid(message: string): C2paError {
  return new C2paError('INVALID_INPUT', message);
}

function assertionBox(label: string, body: unknown): { label: string; payload: Buffer; box: Buffer } {
  const payload = superBoxPayload(Uuids.cbor, label, [encodeBox('cbor', encodeCbor(body))]);
  return { label, payload, box: encodeBox('jumb', payload) };
}

interface Draft {
  claim: Buffer;
  assertions: { label: string; payload: Buffer; box: Buffer }[];
  manifestLabel: string;
  instanceId: string;
}

/** Everything of the manifest but its signature: the assertions and the claim that hashes them. */
function draft(input: BuildManifestInput): Draft {
  const { asset, mimeType, title, attestationIds, runId, claimGenerator } = input;
  const generator = GENERATOR.exec(claimGenerator);
  if (generator === null) throw invalid(`claimGenerator must be "name/version", got "${claimGenerator}"`);
  if (!MIME.test(mimeType)) throw invalid(`mimeType "${mimeType}" is not a media type`);
  if (title.length === 0) throw invalid('title must not be empty');
  if (runId.length === 0) throw invalid('runId must not be empty');
  if (!attestationIds.every((id) => typeof id === 'string' && id.length > 0)) {
    throw invalid('attestationIds must be non-empty strings');
  }
  const time = input.time ?? new Date();
  if (Number.isNaN(time.getTime())) throw invalid('time is not a valid date');
  const instanceId = input.instanceId ?? `xmp:iid:${randomUUID()}`;
  const manifestLabel = input.manifestLabel ?? `urn:uuid:${randomUUID()}`;
  if (!/^urn:uuid:[0-9a-f-]{36}$/.test(manifestLabel)) throw invalid('manifestLabel must be urn:uuid:<uuid>');
  if (input.assetSha256 !== undefined && input.assetSha256.length !== 32) {
    throw invalid('assetSha256 must be 32 bytes');
  }

  const assertions = [
    // `pad` is mandatory in the 1.4 CDDL (c2pa-rs fails to decode a data hash without it); it only
    // reserves room when the manifest is embedded, so a sidecar carries an empty one.
    assertionBox(DATA_HASH_LABEL, {
      name: DATA_HASH_NAME,
      alg: HASH_ALG,
      hash: input.assetSha256 ?? hash('sha256', asset, 'buffer'),
      pad: Buffer.alloc(0),
    }),
    assertionBox(ACTIONS_LABEL, {
      actions: [
        {
          action: 'c2pa.created',
          when: time.toISOString(),
          softwareAgent: { name: generator[1], version: generator[2] },
          digitalSourceType: DIGITAL_SOURCE_TYPE,
        },
      ],
    }),
    assertionBox(ATTESTATIONS_LABEL, {
      run_id: runId,
      attestation_ids: [...attestationIds],
    } satisfies AttestationsAssertion),
  ];

  // Field order follows the 1.4 claim-map CDDL; c2pa-rs reads by name, so order is cosmetic.
  const claim = encodeCbor({
    claim_generator: claimGenerator,
    claim_generator_info: [{ name: generator[1], version: generator[2] }],
    signature: SIGNATURE_URI,
    assertions: assertions.map((a) => ({
      url: assertionUri(a.label),
      alg: HASH_ALG,
      // The hashed-URI hash covers the assertion superbox without its own LBox/TBox header.
      hash: hash('sha256', a.payload, 'buffer'),
    })),
    'dc:format': mimeType,
    instanceID: instanceId,
    'dc:title': title,
    alg: HASH_ALG,
  });
  return { claim, assertions, manifestLabel, instanceId };
}

/** The JUMBF manifest store of a drafted manifest and its claim signature. */
function assemble(d: Draft, cose: Buffer): BuiltManifest {
  const store = encodeSuperBox(Uuids.manifestStore, STORE_LABEL, [
    encodeSuperBox(Uuids.manifest, d.manifestLabel, [
      encodeSuperBox(
        Uuids.assertionStore,
        ASSERTION_STORE_LABEL,
        d.assertions.map((a) => a.box),
      ),
      encodeSuperBox(Uuids.claim, CLAIM_LABEL, [encodeBox('cbor', d.claim)]),
      encodeSuperBox(Uuids.signature, SIGNATURE_LABEL, [encodeBox('cbor', cose)]),
    ]),
  ]);
  return {
    store,
    manifestLabel: d.manifestLabel,
    digest: `sha256:${hash('sha256', store)}`,
    instanceId: d.instanceId,
  };
}

/**
 * Builds and signs a C2PA 1.4 manifest store (one manifest, claim version 1) for an asset that
 * cannot carry it, to be stored as a sidecar: a hard binding by `c2pa.hash.data` over all asset
 * bytes (no exclusions: nothing is embedded), a `c2pa.actions.v2` with `c2pa.created`, and
 * `dev.service.vault.attestations` linking the run's attestation IDs. Layout and field choices
 * are in docs/c2pa.md; c2pa-rs validates the result as Trusted (test/unit/c2pa). Without a
 * time-stamp, validators judge the signer's certificate at validation time: see
 * {@link buildTimestampedManifest}.
 */
export function buildManifest(input: BuildManifestInput): BuiltManifest {
  const d = draft(input);
  return assemble(d, signClaim(input.signer, d.claim));
}

/**
 * {@link buildManifest} with an RFC 3161 time-stamp of the claim signature in its `sigTst` header
 * (C2PA 1.4), so validators judge the signer's certificate at the time-stamp's time and the
 * manifest stays valid after the certificate expires. `stamp` gets the bytes to time-stamp and
 * returns the TSA's answer (`response`: the DER TimeStampResp), already verified by the caller;
 * whatever else it returns comes back as `timestamp`. The manifest module itself does no I/O.
 */
export async function buildTimestampedManifest<T extends { readonly response: Buffer }>(
  input: BuildManifestInput,
  stamp: (data: Buffer) => Promise<T>,
): Promise<BuiltManifest & { timestamp: T }> {
  const d = draft(input);
  const timestamp = await stamp(claimTimestampData(input.signer, d.claim));
  return { ...assemble(d, signClaim(input.signer, d.claim, timestamp.response)), timestamp };
}

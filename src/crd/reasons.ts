/**
 * Condition types, reasons, event reasons, the finalizer and the field managers of the resources
 * this operator writes, in one place (kubebuilder habit).
 */
export const FINALIZER = 'vault.service.dev/aibom';

/** SSA field manager of the Run reconciler: status.attestations, artifacts, conditions, observedGeneration. */
export const FIELD_MANAGER = 'aibom-vault-controller';
/**
 * SSA field manager of the transparency projection: status.transparency (Runs and Attestations),
 * the AIBOM's `status.artifacts.aibom.transparency` and the Run's TransparencyPublished condition.
 */
export const TRANSPARENCY_FIELD_MANAGER = 'aibom-vault-transparency';

export const ConditionTypes = {
  /** Every finished step (and, at a terminal phase, the run and its policies) is in the vault. */
  Attested: 'Attested',
  /** The AIBOM is built, signed, has its C2PA manifest and is stored. */
  AIBOMReady: 'AIBOMReady',
  /**
   * Only on a Run whose records the vault lost (the database lost acknowledged writes, e.g. an
   * asynchronous failover): True, for good, saying what was lost, that it was recorded again from
   * the Run, and what cannot be repaired (docs/failover.md).
   */
  RecordsLost: 'RecordsLost',
  /**
   * Every record of the Run is in a transparency log (SERVICE_TRANSPARENCY_WRITER=1; written by the
   * transparency projection, not the Run reconciler). False says why not: reasons
   * TransparencyReasons.
   */
  TransparencyPublished: 'TransparencyPublished',
} as const;

/** The condition types the Run reconciler writes (its field manager owns exactly these). */
export const RECONCILER_CONDITIONS: readonly string[] = [
  ConditionTypes.Attested,
  ConditionTypes.AIBOMReady,
  ConditionTypes.RecordsLost,
];

/** Reasons of TransparencyPublished (src/transparency/summary.ts transparencyCondition). */
export const TransparencyReasons = {
  Published: 'Published',
  /** Some queued jobs failed their last attempt; the message has the latest error and the next attempt. */
  PublicationRetrying: 'PublicationRetrying',
  /** Some records have no job (stored while the writer was off): nothing publishes them on its own. */
  RecordsNotQueued: 'RecordsNotQueued',
  /** Jobs wait their turn (none failed yet). */
  PublicationQueued: 'PublicationQueued',
} as const;

export const Reasons = {
  StepsAttested: 'StepsAttested',
  RunAttested: 'RunAttested',
  WaitingForSteps: 'WaitingForSteps',
  AIBOMRecorded: 'AIBOMRecorded',
  RunNotTerminal: 'RunNotTerminal',
  VaultUnavailable: 'VaultUnavailable',
  ObjectStoreUnavailable: 'ObjectStoreUnavailable',
  SignerUnavailable: 'SignerUnavailable',
  /** The AIBOM's C2PA manifest was found missing or invalid; a new one is being signed. */
  ManifestRepairing: 'ManifestRepairing',
  /** The manifest cannot be repaired (the stored bytes no longer match the record). */
  ManifestRepairFailed: 'ManifestRepairFailed',
  /** No usable RFC 3161 time-stamp within the deadline (TSA down or answering wrongly): retried. */
  TimestampUnavailable: 'TimestampUnavailable',
  /** Recording failed for another reason than an unavailable dependency (the message says why). */
  RecordingFailed: 'RecordingFailed',
  /**
   * A step's capability chain widens a scope or names an invalid scope or principal (a Run admitted
   * before the CRD checked it): the step is not recorded; the message names the link.
   */
  CapabilityChainInvalid: 'CapabilityChainInvalid',
  /**
   * The Run was admitted but cannot be recorded as it is (free-form JSON nested deeper than the
   * vault records, src/controller/run/recordable.ts): never retried; the message names the field.
   */
  RunNotRecordable: 'RunNotRecordable',
  /** RecordsLost: the lost records were recorded again from the Run (the lost ids stay dangling). */
  RecordedAgain: 'RecordedAgain',
} as const;

/** Reasons of a failed recording: which dependency it failed on, or none of them. */
export type FailureReason =
  | typeof Reasons.VaultUnavailable
  | typeof Reasons.ObjectStoreUnavailable
  | typeof Reasons.SignerUnavailable
  | typeof Reasons.TimestampUnavailable
  | typeof Reasons.RecordingFailed
  | typeof Reasons.CapabilityChainInvalid;

export const EventReasons = {
  Attested: 'Attested',
  AIBOMRecorded: 'AIBOMRecorded',
  TransparencyPublished: 'TransparencyPublished',
  ManifestRepaired: 'ManifestRepaired',
  ManifestRepairFailed: 'ManifestRepairFailed',
  /** The Run has no room left for the controller's status (the API server's size limit). */
  StatusTooLarge: 'StatusTooLarge',
  /** The vault lost records the Run's status showed (Warning; docs/failover.md). */
  RecordsLost: 'RecordsLost',
  /** A new AIBOM replaces one whose record the vault lost (Warning). */
  AIBOMSuperseded: 'AIBOMSuperseded',
  /** Attestation resources of records the vault lost were deleted. */
  DanglingResourcesDeleted: 'DanglingResourcesDeleted',
} as const;

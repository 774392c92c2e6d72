/** Condition types, reasons and event reasons of Runs, in one place (kubebuilder habit). */
export const FINALIZER = 'vault.service.dev/aibom';
export const FIELD_MANAGER = 'aibom-vault-controller';

export const ConditionTypes = {
  /** Every finished step (and, at a terminal phase, the run and its policies) is in the vault. */
  Attested: 'Attested',
  /** The AIBOM is built, signed, has its C2PA manifest and is stored. */
  AIBOMReady: 'AIBOMReady',
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
  PipelineFailed: 'PipelineFailed',
} as const;

/**
 * A job loop of a process: works until `signal` aborts, then resolves once its current round has
 * finished. The controller's manager runs two lists of them (src/controller/manager.ts): those
 * that run while the replica leads and those that run on every replica.
 */
export interface Loop {
  /** For logs: "<name> ended" when it fails. */
  readonly name: string;
  run(signal: AbortSignal): Promise<void>;
}

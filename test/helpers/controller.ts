import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import {
  startController,
  type ControllerDeps,
  type RunningController,
} from '../../src/controller/manager.ts';
import { kubeClient } from '../../src/kube/index.ts';
import type { KeySigner } from '../../src/signing/index.ts';
import { stackBlobs } from './blobs.ts';
import { kubeAccess } from './stack.ts';

/** A lease short enough that a test never waits long for leadership. */
export const TEST_LEASE = { durationSeconds: 6, renewDeadlineSeconds: 4, retryPeriodSeconds: 1 } as const;

/** What a test says about its controller; everything of ControllerDeps it leaves out is the stack's default. */
export interface TestControllerOptions extends Partial<Omit<ControllerDeps, 'vault'>> {
  readonly vault: ControllerDeps['vault'];
  /**
   * The service's signer: signs the AIBOMs and every envelope (no namespace has a key of its own),
   * unless `runtimeSigner` or `envelopeSigner` say otherwise.
   */
  readonly signer?: KeySigner;
  /** Names the lease `<leasePrefix>-<6 random hex>` (unique per start), unless `leaseName` is given. */
  readonly leasePrefix?: string;
}

/**
 * The controller started in this process as the integration tests run it: against the stack's API
 * server as the controller's service account (`aibom-vault`), the stack's object store, silent logs,
 * a fresh metrics registry, in the release namespace, with TEST_LEASE. A test passes its vault, its
 * signer and what it varies (watchNamespace, transparency, a counting client, workers, ...); any
 * field given wins over the default. Stop it with `stop()` in afterAll.
 */
export function startTestController(opts: TestControllerOptions): RunningController {
  const { signer, leasePrefix = 'test', ...given } = opts;
  const runtimeSigner = given.runtimeSigner ?? signer;
  const envelopeSigner =
    given.envelopeSigner ??
    (signer !== undefined ? () => Promise.resolve({ signer, authority: 'service' as const }) : undefined);
  if (runtimeSigner === undefined || envelopeSigner === undefined)
    throw new Error('startTestController: give `signer`, or both `runtimeSigner` and `envelopeSigner`');
  return startController({
    client: kubeClient(kubeAccess('aibom-vault')),
    blobs: stackBlobs(),
    logger: pino({ level: 'silent' }),
    registry: new Registry(),
    namespace: 'aibom-vault-system',
    leaseName: `${leasePrefix}-${randomBytes(3).toString('hex')}`,
    lease: TEST_LEASE,
    ...given,
    runtimeSigner,
    envelopeSigner,
  });
}

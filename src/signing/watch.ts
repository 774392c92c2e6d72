import type { X509Certificate } from 'node:crypto';
import type { Registry } from 'prom-client';
import { Informer, kubeListerWatcher, type KubeClient } from '../kube/index.ts';
import type { Logger } from '../log/index.ts';
import { SigningError } from './errors.ts';
import type { KeySigner } from './key-signer.ts';
import { certificateRef } from './signer.ts';
import { signerFromTlsSecretData } from './tls.ts';

/**
 * Signers that follow their `kubernetes.io/tls` Secrets while the process runs: cert-manager
 * renews a certificate by rewriting the Secret, and the next signature uses the new key, with no
 * restart. Each Secret is watched by name (list+watch with `fieldSelector=metadata.name=<name>`,
 * which RBAC authorises through `resourceNames`: docs/rbac.md) with the informer of
 * src/kube (watchdog, relist after 410, bookmarks).
 *
 * A Secret that changes into something unusable (a half-written renewal, a wrong key) never
 * replaces a working signer: the previous one stays in use and the failure is logged and kept in
 * `lastError`. Deleting the Secret keeps the last signer too; the next valid Secret replaces it.
 */

interface SecretObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; uid?: string };
  type?: string;
  data?: Record<string, string>;
}

export interface WatchedSigner {
  /** The signer of the Secret as last loaded; throws SigningError before one ever loaded. */
  current(): KeySigner;
  /**
   * CA certificates of every signer held since start, oldest first, without duplicates: a CA
   * rotated away still anchors what was signed under it.
   */
  caCertificates(): X509Certificate[];
  /** Called after each replacement (not for the first load). */
  onRotate(fn: (next: KeySigner, previous: KeySigner) => void): () => void;
  /** The last Secret content that could not be loaded, if the newest one could not. */
  lastError(): SigningError | undefined;
  /** Resolves once the Secret has been listed and a signer loaded; rejects after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface WatchSecretOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly name: string;
  readonly logger: Logger;
  readonly registry?: Registry;
  /** Informer tuning (tests shorten them). */
  readonly watchTimeoutSeconds?: number;
  readonly watchdogSeconds?: number;
}

function secretsPath(namespace?: string): string {
  return namespace === undefined ? '/api/v1/secrets' : `/api/v1/namespaces/${namespace}/secrets`;
}

function byName<T>(client: KubeClient, name: string, namespace?: string) {
  return kubeListerWatcher<T>(client, secretsPath(namespace), {
    fieldSelector: `metadata.name=${name}`,
    // Cached Secrets keep only what a signer is made of.
    transform: (s) => {
      const o = s as SecretObject;
      return { metadata: o.metadata, type: o.type, data: o.data } as T;
    },
  });
}

/**
 * The informer of every Secret named `options.name` (in `namespace`, or in all namespaces), each
 * cached with only what a signer is made of. Both watchers below are this informer with their own
 * handlers.
 */
function secretInformer(
  options: Omit<WatchSecretOptions, 'namespace'>,
  name: string,
  log: Logger,
  namespace?: string,
): Informer<SecretObject> {
  return new Informer<SecretObject>({
    name,
    listerWatcher: byName<SecretObject>(options.client, options.name, namespace),
    logger: log,
    ...(options.registry ? { registry: options.registry } : {}),
    ...(options.watchTimeoutSeconds !== undefined
      ? { watchTimeoutSeconds: options.watchTimeoutSeconds }
      : {}),
    ...(options.watchdogSeconds !== undefined ? { watchdogSeconds: options.watchdogSeconds } : {}),
  });
}

/**
 * The signer of a Secret, or why it is unusable: any failure becomes a SigningError (`error`);
 * `thrown` is what was thrown, for the log.
 */
function parse(secret: SecretObject): { signer: KeySigner } | { error: SigningError; thrown: unknown } {
  try {
    return { signer: signerFromTlsSecretData(secret.data ?? {}) };
  } catch (err) {
    return {
      error:
        err instanceof SigningError
          ? err
          : new SigningError('MISSING_MATERIAL', (err as Error).message, { cause: err }),
      thrown: err,
    };
  }
}

/** The service signer of one Secret (SIGNER_SECRET), reloaded whenever the Secret changes. */
export function watchSignerSecret(options: WatchSecretOptions): WatchedSigner {
  const log = options.logger.child({ secret: `${options.namespace}/${options.name}` });
  const informer = secretInformer(options, `secret-${options.name}`, log, options.namespace);
  let signer: KeySigner | undefined;
  let loadedVersion: string | undefined;
  let error: SigningError | undefined;
  const anchors: X509Certificate[] = [];
  const listeners = new Set<(next: KeySigner, previous: KeySigner) => void>();
  const loadWaiters: (() => void)[] = [];

  const load = (secret: SecretObject): void => {
    const version = secret.metadata?.resourceVersion;
    // Resyncs replay the same object: parse each version once.
    if (version !== undefined && version === loadedVersion) return;
    loadedVersion = version;
    const parsed = parse(secret);
    if ('error' in parsed) {
      error = parsed.error;
      log.error(
        { err: parsed.thrown, code: error.code, keeping: signer?.keyId },
        signer
          ? 'renewed signer Secret is not usable: keeping the previous signer'
          : 'signer Secret is not usable',
      );
      return;
    }
    error = undefined;
    const next = parsed.signer;
    for (const ca of next.caCertificates) if (!anchors.some((a) => a.raw.equals(ca.raw))) anchors.push(ca);
    const previous = signer;
    signer = next;
    const leaf = next.certificateChain?.[0];
    if (previous === undefined) {
      log.info({ keyId: next.keyId, cert: leaf ? certificateRef(leaf) : undefined }, 'signer loaded');
      for (const w of loadWaiters.splice(0)) w();
      return;
    }
    const prevLeaf = previous.certificateChain?.[0];
    if (prevLeaf !== undefined && leaf !== undefined && prevLeaf.raw.equals(leaf.raw)) return;
    log.info(
      {
        keyId: next.keyId,
        previousKeyId: previous.keyId,
        cert: leaf ? certificateRef(leaf) : undefined,
        previousCert: prevLeaf ? certificateRef(prevLeaf) : undefined,
      },
      next.keyId === previous.keyId ? 'signer certificate renewed (same key)' : 'signer rotated to a new key',
    );
    for (const fn of listeners) {
      try {
        fn(next, previous);
      } catch (err) {
        log.error({ err }, 'rotation listener failed');
      }
    }
  };

  informer.addHandler({
    onAdd: load,
    onUpdate: (_old, next) => load(next),
    onDelete: () => log.warn({ keeping: signer?.keyId }, 'signer Secret deleted: keeping the last signer'),
  });
  informer.start();

  return {
    current() {
      if (signer === undefined) {
        throw (
          error ??
          new SigningError(
            'MISSING_MATERIAL',
            `Secret ${options.namespace}/${options.name} is not loaded (yet)`,
          )
        );
      }
      return signer;
    },
    caCertificates: () => [...anchors],
    onRotate(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    lastError: () => error,
    async ready(timeoutMs = 30_000) {
      if (signer !== undefined) return;
      const signal = AbortSignal.timeout(timeoutMs);
      await informer.waitForSync(signal).catch(() => undefined);
      if (signer !== undefined) return;
      if (informer.hasSynced()) {
        throw (
          error ??
          new SigningError('MISSING_MATERIAL', `Secret ${options.namespace}/${options.name} does not exist`)
        );
      }
      throw new SigningError(
        'MISSING_MATERIAL',
        `Secret ${options.namespace}/${options.name} could not be listed within ${timeoutMs} ms`,
      );
    },
    stop: () => informer.stop(),
  };
}

/** A tenant's own signer, or the reason its Secret is unusable (never a silent fallback). */
type CustomerEntry =
  { version: string | undefined; signer: KeySigner } | { version: string | undefined; error: SigningError };

export interface CustomerSigners {
  /**
   * The signer of `namespace`'s customer Secret, undefined when the namespace has none. Waits for
   * the first list, so a namespace's key is never missed because the cache was still empty;
   * throws SigningError when the namespace's Secret exists but is unusable.
   */
  signerOf(namespace: string): Promise<KeySigner | undefined>;
  stop(): Promise<void>;
}

/**
 * Every namespace's CUSTOMER_SIGNER_SECRET, watched across the cluster by name (one list+watch,
 * `fieldSelector=metadata.name=<name>` on all namespaces) and parsed once per Secret version, so a
 * renewed customer key is used from its next signature on.
 */
export function watchCustomerSigners(options: Omit<WatchSecretOptions, 'namespace'>): CustomerSigners {
  const log = options.logger.child({ customerSecret: options.name });
  const informer = secretInformer(options, `customer-${options.name}`, log);
  const entries = new Map<string, CustomerEntry>();
  const load = (secret: SecretObject): void => {
    const namespace = secret.metadata?.namespace;
    if (namespace === undefined) return;
    const version = secret.metadata?.resourceVersion;
    const known = entries.get(namespace);
    if (known !== undefined && version !== undefined && known.version === version) return;
    const parsed = parse(secret);
    if ('error' in parsed) {
      entries.set(namespace, { version, error: parsed.error });
      log.error(
        { namespace, code: parsed.error.code, err: parsed.thrown },
        'customer signer Secret is not usable',
      );
      return;
    }
    const { signer } = parsed;
    const previous = known !== undefined && 'signer' in known ? known.signer : undefined;
    entries.set(namespace, { version, signer });
    if (previous !== undefined && previous.keyId !== signer.keyId) {
      log.info({ namespace, keyId: signer.keyId, previousKeyId: previous.keyId }, 'customer signer rotated');
    }
  };
  informer.addHandler({
    onAdd: load,
    onUpdate: (_old, next) => load(next),
    onDelete: (secret) => {
      const namespace = secret.metadata?.namespace;
      if (namespace !== undefined) entries.delete(namespace);
    },
  });
  informer.start();
  return {
    async signerOf(namespace) {
      if (!informer.hasSynced()) {
        try {
          await informer.waitForSync(AbortSignal.timeout(30_000));
        } catch (cause) {
          throw new SigningError('MISSING_MATERIAL', `customer signer Secrets could not be listed`, {
            cause,
          });
        }
      }
      const entry = entries.get(namespace);
      if (entry === undefined) return undefined;
      if ('error' in entry) throw entry.error;
      return entry.signer;
    },
    stop: () => informer.stop(),
  };
}

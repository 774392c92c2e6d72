import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { loadSignerFromFiles, signerFromTlsSecretData, type KeySigner } from '../signing/index.ts';
import { s3BlobStore, type BlobStore } from '../blob/store.ts';
import { ConfigError, type Config } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { setupTransparency, type Transparency } from '../transparency/setup.ts';
import { connectVault, migrate, type Vault } from '../vault/index.ts';

/** Loads configuration or exits 2 with the whole list of problems on stderr (no stack trace). */
export function fatalConfig<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

/** KUBECONFIG when set, else the in-cluster service account. */
export function kubeConfigFrom(config: Config): KubeConfig {
  const kc = new KubeConfig();
  if (config.KUBECONFIG !== undefined) kc.loadFromFile(config.KUBECONFIG);
  else kc.loadFromCluster();
  return kc;
}

/**
 * Applies pending migrations (as the login role, under an advisory lock, so concurrent replicas are
 * safe) and opens the runtime pool, whose sessions run as the append-only `vault_writer` role.
 */
export async function openVaultFrom(config: Config, logger: Logger, appName: string): Promise<Vault> {
  const url = config.DATABASE_URL;
  if (url === undefined) throw new ConfigError(['DATABASE_URL: required']);
  await migrate(url, { logger });
  return connectVault(url, {
    applicationName: appName,
    onIdleError: (err) => logger.warn({ err }, 'idle PostgreSQL connection failed; it will be replaced'),
    onListenerError: (err) => logger.warn({ err }, 'PostgreSQL LISTEN connection failed; reconnecting'),
  });
}

/**
 * The service signer: from PEM files when SIGNER_*_FILE are set, else from the kubernetes.io/tls
 * Secret SIGNER_SECRET (as cert-manager issues it). Parsed once at start.
 */
export async function loadServiceSigner(config: Config, kc: KubeConfig): Promise<KeySigner> {
  if (config.SIGNER_CERT_FILE !== undefined || config.SIGNER_KEY_FILE !== undefined) {
    if (config.SIGNER_CERT_FILE === undefined || config.SIGNER_KEY_FILE === undefined) {
      throw new ConfigError(['SIGNER_CERT_FILE and SIGNER_KEY_FILE go together']);
    }
    return loadSignerFromFiles({
      certFile: config.SIGNER_CERT_FILE,
      keyFile: config.SIGNER_KEY_FILE,
      ...(config.SIGNER_CA_FILE !== undefined ? { caFile: config.SIGNER_CA_FILE } : {}),
    });
  }
  return signerFromSecret(config, kc, config.SIGNER_SECRET);
}

/** A signer from a kubernetes.io/tls Secret named `name` (in POD_NAMESPACE) or `namespace/name`. */
export async function signerFromSecret(config: Config, kc: KubeConfig, ref: string): Promise<KeySigner> {
  const [namespace, name] = ref.includes('/')
    ? (ref.split('/', 2) as [string, string])
    : [config.POD_NAMESPACE, ref];
  const secret = await kc.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace, name });
  return signerFromTlsSecretData(secret.data ?? {});
}

/**
 * The transparency wiring both processes share (SERVICE_TRANSPARENCY_WRITER=1 or a sidecar serving
 * the local log): the log key from SCITT_LOG_SECRET (the service signer when unset).
 */
export async function transparencyFrom(
  config: Config,
  kc: KubeConfig,
  vault: Vault,
  signer: KeySigner,
  logger: Logger,
): Promise<Transparency> {
  const logSigner =
    config.SCITT_LOG_SECRET !== undefined
      ? await signerFromSecret(config, kc, config.SCITT_LOG_SECRET)
      : signer;
  return setupTransparency({
    vault,
    signer,
    caCertificates: signer.caCertificates,
    logSigner,
    issuer: config.SCITT_LOG_ISSUER,
    backend: config.SCITT_BACKEND,
    ...(config.SCITT_URL !== undefined ? { scittUrl: config.SCITT_URL } : {}),
    ...(config.SCITT_TOKEN !== undefined ? { scittToken: config.SCITT_TOKEN } : {}),
    // The publisher binds its own component: a second `component` would be a duplicate key.
    logger,
  });
}

/** The artifact store from S3_* (required by both components, so present once config loaded). */
export function blobStoreFrom(config: Config): BlobStore {
  const { S3_ENDPOINT: endpoint, S3_ACCESS_KEY: accessKey, S3_SECRET_KEY: secretKey } = config;
  if (endpoint === undefined || accessKey === undefined || secretKey === undefined) {
    throw new ConfigError(['S3_ENDPOINT, S3_ACCESS_KEY and S3_SECRET_KEY are required']);
  }
  return s3BlobStore({ endpoint, accessKey, secretKey, bucket: config.S3_BUCKET, region: config.S3_REGION });
}

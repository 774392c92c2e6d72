import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { loadSignerFromFiles, signerFromTlsSecretData, type KeySigner } from '../signing/index.ts';
import { ConfigError, type Config } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { createVaultPool, migrate, openVault, type Vault } from '../vault/index.ts';

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
  const pool = createVaultPool(url, {
    applicationName: appName,
    onIdleError: (err) => logger.warn({ err }, 'idle PostgreSQL connection failed; it will be replaced'),
  });
  return openVault(pool);
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
  const [namespace, name] = config.SIGNER_SECRET.includes('/')
    ? (config.SIGNER_SECRET.split('/', 2) as [string, string])
    : [config.POD_NAMESPACE, config.SIGNER_SECRET];
  const secret = await kc.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace, name });
  return signerFromTlsSecretData(secret.data ?? {});
}

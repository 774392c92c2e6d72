import { createPrivateKey, type KeyObject, type X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Registry } from 'prom-client';
import {
  kubeClient,
  KubeAccessError,
  loadKubeAccess,
  resourcePath,
  type KubeAccess,
  type ResourceType,
} from '../kube/index.ts';
import {
  loadSignerFromFiles,
  parseCertificates,
  signerFromTlsSecretData,
  type KeySigner,
  type Signer,
} from '../signing/index.ts';
import { watchSignerSecret, type WatchedSigner } from '../signing/watch.ts';
import { rememberSigner } from '../export/keys.ts';
import { createTsaClient, type Timestamper } from '../timestamp/index.ts';
import { s3BlobStore, type BlobStore } from '../blob/store.ts';
import { ConfigError, type Config } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { setupTransparency, type Transparency } from '../transparency/setup.ts';
import {
  connectVault,
  migrate,
  VaultError,
  withTls,
  type Vault,
  type VaultPoolOptions,
} from '../vault/index.ts';

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

/** KUBECONFIG when set, else the in-cluster service account; a bad one is a configuration error. */
export async function kubeConfigFrom(config: Config): Promise<KubeAccess> {
  try {
    return await loadKubeAccess(config.KUBECONFIG);
  } catch (err) {
    if (err instanceof KubeAccessError) throw new ConfigError([err.message]);
    throw err;
  }
}

const SECRET_TYPE: ResourceType = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' };

/** A Secret's data (base64 values) through the API server. */
async function readSecretData(
  kc: KubeAccess,
  namespace: string,
  name: string,
): Promise<Record<string, string>> {
  const secret = await kubeClient(kc).request<{ data?: Record<string, string> }>({
    method: 'GET',
    path: resourcePath(SECRET_TYPE, { namespace, name }),
  });
  return secret.data ?? {};
}

/**
 * Applies pending migrations (as the owner: DATABASE_MIGRATION_URL, else the DATABASE_URL login;
 * under an advisory lock, so concurrent replicas are safe) and opens the runtime pool, whose
 * sessions run as the append-only `vault_writer` role. With a separate owner login the runtime login
 * must hold nothing more (docs/vault.md "Roles"): a runtime login that is a superuser, owns objects
 * or may become the owner could undo every guarantee, so the process refuses to start. With one
 * login for both (development), the same finding is a warning.
 */
export async function openVaultFrom(
  config: Config,
  logger: Logger,
  appName: string,
  pool: Pick<VaultPoolOptions, 'plans'> = {},
): Promise<Vault> {
  const url = config.DATABASE_URL;
  if (url === undefined) throw new ConfigError(['DATABASE_URL: required']);
  const tls = config.DATABASE_CA_FILE !== undefined ? { caFile: config.DATABASE_CA_FILE } : undefined;
  const owner = config.DATABASE_MIGRATION_URL ?? url;
  await migrate(tls ? withTls(owner, tls) : owner, { logger });
  const vault = await connectVault(url, {
    ...pool,
    ...(tls ? { tls } : {}),
    max: config.PG_POOL_MAX,
    applicationName: appName,
    capabilityTokens: config.SERVICE_CAPABILITY_TOKENS,
    connectTimeoutMs: config.PG_CONNECT_TIMEOUT_MS,
    queryTimeoutMs: config.PG_QUERY_TIMEOUT_MS,
    onIdleError: (err) => logger.warn({ err }, 'idle PostgreSQL connection failed; it will be replaced'),
    onListenerError: (err) => logger.warn({ err }, 'PostgreSQL LISTEN connection failed; reconnecting'),
  });
  const problems = await vault.runtimeRoleProblems();
  if (problems.length > 0) {
    if (config.DATABASE_MIGRATION_URL !== undefined) {
      await vault.close();
      throw new VaultError(
        'RUNTIME_ROLE_PRIVILEGED',
        `the DATABASE_URL login is not a runtime login: ${problems.join('; ')}`,
      );
    }
    logger.warn(
      { problems },
      'the DATABASE_URL login is privileged (development setup): use a runtime login that owns nothing and set DATABASE_MIGRATION_URL (docs/vault.md)',
    );
  }
  return vault;
}

/**
 * The service signer: from PEM files when SIGNER_*_FILE are set, else from the kubernetes.io/tls
 * Secret SIGNER_SECRET (as cert-manager issues it). Parsed once at start.
 */
export async function loadServiceSigner(config: Config, kc: KubeAccess): Promise<KeySigner> {
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

/** `namespace/name` of a Secret reference (a bare name is in POD_NAMESPACE). */
function secretRef(config: Config, ref: string): [string, string] {
  return ref.includes('/') ? (ref.split('/', 2) as [string, string]) : [config.POD_NAMESPACE, ref];
}

/**
 * The service signer for the whole life of the process. From SIGNER_SECRET it follows the Secret
 * (src/signing/watch.ts): a renewal by cert-manager is used from the next signature on, without a
 * restart. From SIGNER_*_FILE it is loaded once (files do not rotate under us).
 */
export async function serviceSignerFrom(
  config: Config,
  kc: KubeAccess,
  logger: Logger,
  registry?: Registry,
): Promise<WatchedSigner> {
  if (config.SIGNER_CERT_FILE !== undefined || config.SIGNER_KEY_FILE !== undefined) {
    const signer = await loadServiceSigner(config, kc);
    return {
      current: () => signer,
      caCertificates: () => [...signer.caCertificates],
      onRotate: () => () => undefined,
      lastError: () => undefined,
      ready: () => Promise.resolve(),
      stop: () => Promise.resolve(),
    };
  }
  const [namespace, name] = secretRef(config, config.SIGNER_SECRET);
  const watched = watchSignerSecret({
    client: kubeClient(kc),
    namespace,
    name,
    logger: logger.child({ component: 'signer' }),
    ...(registry ? { registry } : {}),
  });
  try {
    await watched.ready();
  } catch (err) {
    await watched.stop();
    throw err;
  }
  return watched;
}

/**
 * A Signer that is always the watched signer of this moment. For code that holds a Signer for
 * long (the SCITT publisher) and reads its chain and signs in one synchronous step, so the two
 * never come from different keys.
 */
export function liveSigner(source: Pick<WatchedSigner, 'current'>): Signer {
  return {
    get keyId() {
      return source.current().keyId;
    },
    get algorithm() {
      return source.current().algorithm;
    },
    get publicKey() {
      return source.current().publicKey;
    },
    get certificateChain() {
      return source.current().certificateChain ?? [];
    },
    sign: (data, encoding) => source.current().sign(data, encoding),
  };
}

/**
 * CA certificates that only grow: every CA the watched signer has had, old ones kept (they anchor
 * what was signed under them). Returned as one array that is updated in place, for dependencies
 * that take an array and read it per request.
 */
export function growingAnchors(
  source: WatchedSigner,
  extra: readonly X509Certificate[] = [],
): X509Certificate[] {
  const anchors = [...source.caCertificates(), ...extra];
  source.onRotate(() => {
    for (const ca of source.caCertificates())
      if (!anchors.some((a) => a.raw.equals(ca.raw))) anchors.push(ca);
  });
  return anchors;
}

/** The RFC 3161 client of TSA_URL (with TSA_TRUST_ANCHORS), or undefined when no TSA is configured. */
export async function timestamperFrom(config: Config): Promise<Timestamper | undefined> {
  if (config.TSA_URL === undefined) return undefined;
  const anchors = await tsaTrustAnchorsFrom(config);
  if (anchors.length === 0)
    throw new ConfigError(['TSA_URL needs TSA_TRUST_ANCHORS (the TSA root CA PEM file)']);
  return createTsaClient({ url: config.TSA_URL, trustAnchors: anchors, deadlineMs: config.TSA_DEADLINE_MS });
}

/** The roots of TSA_TRUST_ANCHORS; empty when unset. */
export async function tsaTrustAnchorsFrom(config: Config): Promise<X509Certificate[]> {
  const file = config.TSA_TRUST_ANCHORS;
  if (file === undefined) return [];
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`TSA_TRUST_ANCHORS: cannot read ${file}: ${(err as Error).message}`]);
  }
  return parseCertificates(pem, 'TSA_TRUST_ANCHORS');
}

/** A signer from a kubernetes.io/tls Secret named `name` (in POD_NAMESPACE) or `namespace/name`. */
export async function signerFromSecret(config: Config, kc: KubeAccess, ref: string): Promise<KeySigner> {
  const [namespace, name] = secretRef(config, ref);
  return signerFromTlsSecretData(await readSecretData(kc, namespace, name));
}

/**
 * The Ed25519 key the controller signs C2SP checkpoints with (TLOG_NOTE_SECRET: `note.key`, a
 * PKCS#8 PEM); undefined when unset. Read once at start: a new key takes a restart, and the
 * witnesses must be given its verifier key first (docs/transparency.md "Witnessed logs").
 */
export async function noteKeyFrom(config: Config, kc: KubeAccess): Promise<KeyObject | undefined> {
  if (config.TLOG_NOTE_SECRET === undefined) return undefined;
  const [namespace, name] = secretRef(config, config.TLOG_NOTE_SECRET);
  const pem = (await readSecretData(kc, namespace, name))['note.key'];
  if (pem === undefined) {
    throw new ConfigError([`TLOG_NOTE_SECRET: Secret ${namespace}/${name} has no note.key`]);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(Buffer.from(pem, 'base64').toString('utf8'));
  } catch (err) {
    throw new ConfigError([`TLOG_NOTE_SECRET: note.key is not a PEM private key: ${(err as Error).message}`]);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new ConfigError([
      `TLOG_NOTE_SECRET: note.key must be an Ed25519 key, not ${String(key.asymmetricKeyType)}`,
    ]);
  }
  return key;
}

/**
 * The transparency wiring both processes share (SERVICE_TRANSPARENCY_WRITER=1 or a sidecar serving
 * the local log): the log key from SCITT_LOG_SECRET (the service signer when unset). The log key
 * is read once at start (a new one takes a restart: docs/timestamps.md) and is recorded in the key
 * store before anything is served or signed with it, so receipts signed with it still verify
 * through GET /v1/keys after it is replaced.
 */
export async function transparencyFrom(
  config: Config,
  kc: KubeAccess,
  vault: Vault,
  source: WatchedSigner,
  logger: Logger,
): Promise<Transparency> {
  const logSigner =
    config.SCITT_LOG_SECRET !== undefined
      ? await signerFromSecret(config, kc, config.SCITT_LOG_SECRET)
      : source.current();
  await rememberSigner(vault.signers, logSigner, { namespace: '', role: 'log' });
  return setupTransparency({
    vault,
    signer: liveSigner(source),
    caCertificates: growingAnchors(source),
    logSigner,
    issuer: config.SCITT_LOG_ISSUER,
    backend: config.SCITT_BACKEND,
    ...(config.SCITT_URL !== undefined ? { scittUrl: config.SCITT_URL } : {}),
    ...(config.SCITT_TOKEN !== undefined ? { scittToken: config.SCITT_TOKEN } : {}),
    scittTimeoutMs: config.SCITT_TIMEOUT_MS,
    // The publisher and worker bind their own component: a second `component` would be a duplicate key.
    logger,
  });
}

/** The artifact store from S3_* (required by both components, so present once config loaded). */
export function blobStoreFrom(config: Config): BlobStore {
  const { S3_ENDPOINT: endpoint, S3_ACCESS_KEY: accessKey, S3_SECRET_KEY: secretKey } = config;
  if (endpoint === undefined || accessKey === undefined || secretKey === undefined) {
    throw new ConfigError(['S3_ENDPOINT, S3_ACCESS_KEY and S3_SECRET_KEY are required']);
  }
  return s3BlobStore({
    endpoint,
    accessKey,
    secretKey,
    bucket: config.S3_BUCKET,
    region: config.S3_REGION,
    timeoutMs: config.S3_TIMEOUT_MS,
    ...(config.S3_CA_FILE !== undefined ? { ca: readFileSync(config.S3_CA_FILE, 'utf8') } : {}),
  });
}

/**
 * The one configuration schema of the service. Every environment variable any entry point reads is
 * declared here with its default and description; nothing else in the code base reads `process.env`.
 * `docs/configuration.md` and the README table are generated from this list (`npm run docs:config`).
 */

export type Component = 'controller' | 'sidecar' | 'cli' | 'stack';

/** A parser turns the raw string into a value or throws an Error whose message explains why. */
type Parser<T> = (raw: string) => T;

export interface Setting<T> {
  readonly description: string;
  /** Raw default; `undefined` means unset unless the component requires it. */
  readonly default?: string;
  /** Components that refuse to start without this setting. */
  readonly requiredBy?: readonly Component[];
  readonly parse: Parser<T>;
  /** Secret values are never echoed in error messages or logs. */
  readonly secret?: boolean;
}

const str: Parser<string> = (raw) => {
  if (raw.trim() === '') throw new Error('must not be empty');
  return raw;
};

const flag: Parser<boolean> = (raw) => {
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false' || raw === '') return false;
  throw new Error(`must be 1 or 0, got "${raw}"`);
};

const intIn =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^\d+$/.test(raw)) throw new Error(`must be an integer, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };

const url: Parser<string> = (raw) => {
  try {
    return new URL(raw).toString().replace(/\/$/, '');
  } catch {
    throw new Error('must be an absolute URL');
  }
};

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw) => {
    if ((values as string[]).includes(raw)) return raw as T;
    throw new Error(`must be one of ${values.join(', ')}, got "${raw}"`);
  };

const logLevel = oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent');

export const schema = {
  LOG_LEVEL: { description: 'pino log level', default: 'info', parse: logLevel },
  DATABASE_URL: {
    description: 'PostgreSQL connection string of the vault (system of record)',
    requiredBy: ['controller', 'sidecar'],
    parse: url,
    secret: true,
  },
  S3_ENDPOINT: {
    description: 'S3/MinIO endpoint URL for artifacts (AIBOM blobs and C2PA sidecars)',
    requiredBy: ['controller', 'sidecar'],
    parse: url,
  },
  S3_ACCESS_KEY: {
    description: 'S3 access key',
    requiredBy: ['controller', 'sidecar'],
    parse: str,
    secret: true,
  },
  S3_SECRET_KEY: {
    description: 'S3 secret key',
    requiredBy: ['controller', 'sidecar'],
    parse: str,
    secret: true,
  },
  S3_BUCKET: { description: 'bucket holding artifacts', default: 'aibom-vault', parse: str },
  S3_REGION: { description: 'S3 region', default: 'us-east-1', parse: str },
  KUBECONFIG: {
    description: 'kubeconfig path; in-cluster service account configuration when unset',
    parse: str,
  },
  POD_NAMESPACE: {
    description: 'namespace of this pod (leader-election Lease, default signer Secret)',
    default: 'aibom-vault-system',
    parse: str,
  },
  POD_NAME: { description: 'identity of this replica in leader election', parse: str },
  LEADER_ELECTION_LEASE: {
    description:
      'name of the coordination.k8s.io Lease (in POD_NAMESPACE) controller replicas elect a leader on',
    default: 'aibom-vault-controller',
    parse: str,
  },
  WATCH_NAMESPACE: {
    description: 'reconcile Runs of this namespace only; all namespaces when unset',
    parse: str,
  },
  HTTP_HOST: { description: 'sidecar listen address', default: '0.0.0.0', parse: str },
  HTTP_PORT: { description: 'sidecar listen port', default: '8080', parse: intIn(0, 65535) },
  METRICS_PORT: {
    description: '/metrics, /healthz, /readyz port of the controller and of the sidecar (one per container)',
    default: '9090',
    parse: intIn(0, 65535),
  },
  SERVICE_TRANSPARENCY_WRITER: {
    description:
      'Value 1 enables transparency: new attestations enqueue SCITT jobs; AIBOM metadata gains a transparency entry',
    default: '0',
    parse: flag,
  },
  SERVICE_REQUIRE_SIGNED_EXPORTS: {
    description:
      'Value 1 enforces the signed-manifest guard on every artifact leaving the service, for all tenants',
    default: '1',
    parse: flag,
  },
  SIGNER_SECRET: {
    description:
      'kubernetes.io/tls Secret (`name` in POD_NAMESPACE, or `namespace/name`) holding the service signer: tls.crt, tls.key, ca.crt',
    default: 'aibom-vault-signer',
    parse: str,
  },
  SIGNER_CERT_FILE: {
    description: 'signer certificate chain PEM file (instead of SIGNER_SECRET)',
    parse: str,
  },
  SIGNER_KEY_FILE: { description: 'signer private key PEM file (instead of SIGNER_SECRET)', parse: str },
  SIGNER_CA_FILE: { description: 'signer CA bundle PEM file (instead of SIGNER_SECRET)', parse: str },
  CUSTOMER_SIGNER_SECRET: {
    description:
      'name of the kubernetes.io/tls Secret a namespace may create to sign its attestations with its own key',
    default: 'aibom-vault-customer-signer',
    parse: str,
  },
  SCITT_BACKEND: {
    description:
      "transparency backend: local (the service's own RFC 9162 log, dry run) or scrapi (remote SCRAPI service)",
    default: 'local',
    parse: oneOf('local', 'scrapi'),
  },
  SCITT_LOG_SECRET: {
    description:
      'kubernetes.io/tls Secret (in POD_NAMESPACE, or `namespace/name`) with the key the local transparency log signs receipts with; the service signer when unset',
    parse: str,
  },
  SCITT_LOG_ISSUER: {
    description:
      'identity of the local transparency log, the `iss` of its receipts (e.g. its public base URL)',
    default: 'aibom-vault',
    parse: str,
  },
  SCITT_TOKEN: {
    description: 'bearer token sent to the remote SCRAPI service (SCITT_BACKEND=scrapi)',
    parse: str,
    secret: true,
  },
  SCITT_TRUST_ANCHORS: {
    description:
      "PEM file of extra CA certificates whose signed statements this deployment's SCRAPI endpoint registers (other deployments publishing here); its own signer CA is always trusted",
    parse: str,
  },
  SCITT_URL: {
    description: 'base URL of the remote SCRAPI transparency service (SCITT_BACKEND=scrapi)',
    parse: url,
  },
  TSA_URL: {
    description:
      'RFC 3161 time-stamping authority (POST application/timestamp-query) that time-stamps every AIBOM signature and C2PA manifest, so they verify after the signer certificate expires; unset: no time-stamps',
    parse: url,
  },
  TSA_TRUST_ANCHORS: {
    description:
      "PEM file of the root CA(s) the TSA's certificate must chain to; required with TSA_URL, and what the export guard and `service-ctl verify --aibom` trust time-stamps from",
    parse: str,
  },
  TSA_DEADLINE_MS: {
    description:
      'how long one time-stamp may take, retries included; past it the AIBOM is retried later (reason TimestampUnavailable, docs/adr/0007)',
    default: '15000',
    parse: intIn(100, 600_000),
  },
  SERVICE_TRUST_ANCHOR: {
    description: 'CA certificate PEM file service-ctl trusts when verifying signatures and C2PA manifests',
    parse: str,
  },
  SERVICE_API_URL: {
    description: 'base URL of the sidecar API, used by service-ctl',
    default: 'http://127.0.0.1:8080',
    parse: url,
  },
  SERVICE_TOKEN: {
    description: 'bearer token service-ctl sends to the API (a Kubernetes token)',
    parse: str,
    secret: true,
  },
} as const satisfies Record<string, Setting<unknown>>;

export type Key = keyof typeof schema;
type ValueOf<K extends Key> = ReturnType<(typeof schema)[K]['parse']>;
type HasDefault<K extends Key> = (typeof schema)[K] extends { default: string } ? K : never;

/** Keys with a default are always present; the others may be undefined unless required. */
export type Config = { readonly [K in Key as HasDefault<K>]: ValueOf<K> } & {
  readonly [K in Exclude<Key, HasDefault<Key>>]?: ValueOf<K>;
};

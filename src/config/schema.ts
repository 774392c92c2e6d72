/**
 * The one configuration schema of the service. Every environment variable any entry point reads is
 * declared here with its default and description; nothing else in the code base reads `process.env`.
 * `docs/configuration.md` and the README table are generated from this list (`npm run docs:config`).
 */

import { ConfigValueError } from './errors.ts';

export type Component = 'controller' | 'sidecar' | 'cli' | 'stack';

/** A parser turns the raw string into a value or throws a ConfigValueError whose message explains why. */
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
  if (raw.trim() === '') throw new ConfigValueError('must not be empty');
  return raw;
};

const flag: Parser<boolean> = (raw) => {
  if (raw === '1' || raw === 'true') return true;
  if (raw === '0' || raw === 'false' || raw === '') return false;
  throw new ConfigValueError(`must be 1 or 0, got "${raw}"`);
};

const intIn =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^\d+$/.test(raw))
      throw new ConfigValueError(`must be a whole number from ${min} to ${max}, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new ConfigValueError(`must be between ${min} and ${max}, got ${n}`);
    return n;
  };

const url: Parser<string> = (raw) => {
  try {
    return new URL(raw).toString().replace(/\/$/, '');
  } catch {
    throw new ConfigValueError('must be an absolute URL');
  }
};

const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw) => {
    if ((values as string[]).includes(raw)) return raw as T;
    throw new ConfigValueError(`must be one of ${values.join(', ')}, got "${raw}"`);
  };

const lostCheckpoint: Parser<{ treeSize: number; rootHash: string }> = (raw) => {
  const m = /^([1-9][0-9]{0,15}):([0-9a-f]{64})$/.exec(raw.trim());
  if (m === null) throw new ConfigValueError('must be <tree size>:<64 hex digits of the root hash>');
  return { treeSize: Number(m[1]), rootHash: m[2]! };
};

/**
 * TLOG_WITNESSES: entries separated by commas or newlines, each `<submission URL> <verifier key>`
 * (the key a c2sp.org/signed-note vkey of signature type 0x04, cosignature/v1).
 */
export interface WitnessSetting {
  readonly url: string;
  readonly vkey: string;
}

const witnessList: Parser<readonly WitnessSetting[]> = (raw) => {
  const out: WitnessSetting[] = [];
  for (const entry of raw.split(/[,\n]/)) {
    const parts = entry.trim().split(/\s+/);
    if (parts.length === 1 && parts[0] === '') continue;
    if (parts.length !== 2)
      throw new ConfigValueError(`each witness is "<url> <vkey>", got "${entry.trim()}"`);
    const [rawUrl, vkey] = parts as [string, string];
    let u: URL;
    try {
      u = new URL(rawUrl);
    } catch {
      throw new ConfigValueError(`witness URL "${rawUrl}" is not an absolute URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new ConfigValueError(`witness URL "${rawUrl}" is not http(s)`);
    // A cosignature/v1 vkey: <name>+<8 hex>+base64(0x04 || 32-byte key), 44 characters without padding
    // (checked in full at start).
    if (!/^[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}$/.test(vkey)) {
      throw new ConfigValueError(`witness key "${vkey}" is not a signed-note verifier key`);
    }
    if (Buffer.from(vkey.slice(vkey.indexOf('+', vkey.indexOf('+') + 1) + 1), 'base64')[0] !== 0x04) {
      throw new ConfigValueError(`witness key "${vkey}" is not a cosignature/v1 key (signature type 0x04)`);
    }
    out.push({ url: u.toString().replace(/\/$/, ''), vkey });
  }
  return out;
};

/** A schema-less URL: host[:port][/path], no scheme, no spaces or pluses (a note key name). */
const origin: Parser<string> = (raw) => {
  if (!/^[^\s+/:]+(:[0-9]+)?(\/[^\s+]*)?$/.test(raw) || raw.includes('://')) {
    throw new ConfigValueError(
      `must be a schema-less URL like vault.example.com or vault.example.com/team, got "${raw}"`,
    );
  }
  return raw.replace(/\/+$/, '');
};

/**
 * A duration as `<n>s`, `<n>m`, `<n>h` or `<n>d` (whole units, at least one second, at most ten
 * years), in milliseconds.
 */
const duration: Parser<number> = (raw) => {
  const m = /^([1-9][0-9]{0,6})(s|m|h|d)$/.exec(raw.trim());
  if (m === null) throw new ConfigValueError(`must be a duration like 90s, 30m, 12h or 30d, got "${raw}"`);
  const ms =
    Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  if (ms > 3650 * 86_400_000) throw new ConfigValueError(`must be at most 3650d, got "${raw}"`);
  return ms;
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
  DATABASE_MIGRATION_URL: {
    description:
      'PostgreSQL connection string of the schema owner, used only to apply migrations at start; the runtime login (DATABASE_URL) must then own nothing (docs/vault.md). Unset: migrations run as DATABASE_URL (development)',
    parse: url,
    secret: true,
  },
  S3_ENDPOINT: {
    description:
      'endpoint URL of the S3-compatible store for artifacts (AIBOM blobs and C2PA sidecars), path-style (docs/storage.md)',
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
  S3_CA_FILE: {
    description:
      'PEM file of the CA(s) the certificate of an https S3_ENDPOINT must chain to (a Secret mounted by the chart: s3.tls.caSecret), instead of the system CAs; the host name is checked too',
    parse: str,
  },
  S3_TIMEOUT_MS: {
    description:
      'deadline of one request to the object store, from sending it to the last byte of the answer; a store that does not answer in time fails the call (the request is aborted): the Run shows ObjectStoreUnavailable, the API answers 503',
    default: '10000',
    parse: intIn(100, 600_000),
  },
  PG_CONNECT_TIMEOUT_MS: {
    description:
      'deadline of opening a PostgreSQL connection (and of waiting for a free pooled one); past it the call fails: the Run shows VaultUnavailable, the API answers 503',
    default: '5000',
    parse: intIn(100, 600_000),
  },
  DATABASE_CA_FILE: {
    description:
      "PEM file of the CA(s) PostgreSQL's certificate must chain to (a Secret mounted by the chart: database.tls.caSecret). Set: every connection (runtime pool, LISTEN, migrations, service-ctl aibom generate) uses TLS and checks the certificate and the host name of the URL, and sslmode/sslrootcert in the URLs are ignored. Unset: the URLs' own sslmode applies",
    parse: str,
  },
  PG_POOL_MAX: {
    description:
      'PostgreSQL connections of the runtime pool per process (each process also holds one LISTEN connection, and one more while it migrates at start): size max_connections for replicas × (PG_POOL_MAX + 1)',
    default: '10',
    parse: intIn(1, 1000),
  },
  PG_QUERY_TIMEOUT_MS: {
    description:
      'deadline of one PostgreSQL statement: the server cancels it (statement_timeout) and the client gives up 1 s later if the server does not answer at all',
    default: '15000',
    parse: intIn(100, 3_600_000),
  },
  KUBE_TIMEOUT_MS: {
    description:
      "deadline of one request of the controller to the Kubernetes API (watches excepted: the informer's watchdog restarts a silent watch)",
    default: '30000',
    parse: intIn(100, 600_000),
  },
  RECONCILE_TIMEOUT_MS: {
    description:
      'longest one reconcile of a Run may hold a worker; past it the worker moves on to other Runs and the Run is retried with backoff (a backstop: every call inside has its own deadline)',
    default: '120000',
    parse: intIn(1_000, 3_600_000),
  },
  ATTESTATION_RESOURCES: {
    description:
      'which Attestation resources the controller keeps in Kubernetes (the vault keeps every record either way; docs/runs.md "Attestation resources"): `perRecord` one per vault record, `perRun` one per ended Run summarising its records, `none` the Run\'s status only',
    default: 'perRecord',
    parse: oneOf('perRecord', 'perRun', 'none'),
  },
  ATTESTATION_RESOURCE_RETENTION: {
    description:
      "Attestation resources of a Run are deleted this long after its AIBOM was recorded (`90s`, `30m`, `12h`, `30d`); the vault keeps every record and the Run's status.attestations names where they are. Unset: kept as long as the Run",
    parse: duration,
  },
  KUBECONFIG: {
    description:
      'kubeconfig path (its current context; one with an exec plugin, an auth provider or a proxy-url is loaded by @kubernetes/client-node); the in-cluster service account when unset (its token re-read every minute)',
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
  HTTP_REQUEST_TIMEOUT_MS: {
    description:
      'sidecar: a client must send its whole request (headers and body) within this time, else 408 and the connection is closed',
    default: '30000',
    parse: intIn(1, 3_600_000),
  },
  HTTP_HEADERS_TIMEOUT_MS: {
    description:
      'sidecar: a client must send its request headers within this time (at most HTTP_REQUEST_TIMEOUT_MS), else 408 and the connection is closed',
    default: '10000',
    parse: intIn(1, 3_600_000),
  },
  HTTP_KEEP_ALIVE_TIMEOUT_MS: {
    description: 'sidecar: an idle keep-alive connection is closed after this time',
    default: '5000',
    parse: intIn(1, 3_600_000),
  },
  HTTP_IDLE_TIMEOUT_MS: {
    description:
      'sidecar: a connection with no traffic in either direction (e.g. a stalled download) is destroyed after this time',
    default: '60000',
    parse: intIn(1, 3_600_000),
  },
  SHUTDOWN_DELAY_SECONDS: {
    description:
      "sidecar: on SIGTERM the API first answers /readyz with 503 and keeps serving for this many seconds, every answer with `Connection: close` (a kept-alive client reconnects through the Service), so that Service endpoints and kube-proxy rules drop the pod before its listener closes (a rolling update then refuses or resets no request); the chart sets 5. At most 15: the whole stop must end within 20 s of SIGTERM (the process exits hard then), inside the chart's 30 s grace period",
    default: '0',
    parse: intIn(0, 15),
  },
  METRICS_HOST: {
    description:
      'listen address of the /metrics, /healthz, /readyz server of the controller and of the sidecar (0.0.0.0 for scrapes and probes of the pod IP)',
    default: '0.0.0.0',
    parse: str,
  },
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
  VAULT_CHECKPOINT_INTERVAL_SECONDS: {
    description:
      'the controller signs a checkpoint of the vault (Merkle tree head over all records, docs/chain.md) this often when records were added; also on request and at leader start',
    default: '60',
    parse: intIn(1, 86_400),
  },
  VAULT_PARTITIONS_AHEAD: {
    description:
      'months of vault partitions (one per UTC month of record ids, docs/vault.md "Partitions") the controller keeps created ahead of the current one; checked at every start-up and hourly by the leader',
    default: '3',
    parse: intIn(0, 120),
  },
  VAULT_RETENTION_MONTHS: {
    description:
      'when above 0, the leader archives each vault partition whose month ended at least this many whole months ago to the object store as signed export bundles (verifiable with `service-ctl verify`), then detaches it from the live table (docs/vault.md "Retention"); 0 keeps every record in the live table',
    default: '0',
    parse: intIn(0, 1200),
  },
  VAULT_RETENTION_DROP: {
    description:
      "Value 1 drops a retired partition's table after its archive is written and it is detached; by default the detached table is kept in the database",
    default: '0',
    parse: flag,
  },
  VAULT_ARCHIVE_PREFIX: {
    description:
      "object key prefix of the retired partitions' archives (`<prefix><partition>/index.json` and its parts)",
    default: 'vault-archive/',
    parse: str,
  },
  VAULT_ACCEPT_LOST_CHECKPOINT: {
    description:
      'after the database lost acknowledged records (docs/failover.md), the checkpointer signs nothing over the new history while the checkpoint kept in the object store covers what was lost; `<tree size>:<root hash hex>` of that checkpoint (the controller logs it, vault_losses holds it) accepts the loss and lets it sign again',
    parse: lostCheckpoint,
  },
  TLOG_NOTE_SECRET: {
    description:
      'Secret (`name` in POD_NAMESPACE, or `namespace/name`) holding the Ed25519 private key (PKCS#8 PEM under `note.key`) the controller signs C2SP checkpoints (signed notes) of both logs with (docs/transparency.md "Witnessed logs"); unset: no signed notes, no /v1/tlog checkpoint, no witnessing',
    parse: str,
  },
  TLOG_ORIGIN: {
    description:
      "schema-less URL of this deployment's API (e.g. vault.example.com): the logs' checkpoint origins and note key names are <TLOG_ORIGIN>/v1/tlog/vault and <TLOG_ORIGIN>/v1/tlog/scitt, their tlog-tiles prefixes. Must be unique among the logs a witness follows",
    default: 'aibom-vault.local',
    parse: origin,
  },
  TLOG_WITNESSES: {
    description:
      'witnesses the leader pushes every new checkpoint of both logs to (c2sp.org/tlog-witness add-checkpoint): comma- or newline-separated `<submission URL> <cosignature/v1 vkey>`; their cosignatures are stored and served with the checkpoints',
    default: '',
    parse: witnessList,
  },
  TLOG_WITNESS_TIMEOUT_MS: {
    description:
      'deadline of one add-checkpoint request to a witness; a push past it is retried on the next round',
    default: '10000',
    parse: intIn(100, 600_000),
  },
  TLOG_PUBLIC: {
    description:
      'Value 1 serves /v1/tlog/{vault,scitt}/checkpoint and the hash tiles without authentication (mirrors, monitors): they reveal record counts and hashes only. Entry bundles always need a token that may read the records they hold',
    default: '0',
    parse: flag,
  },
  SERVICE_REQUIRE_SIGNED_EXPORTS: {
    description:
      'Value 1 enforces the signed-manifest guard on every artifact leaving the service, for all tenants',
    default: '1',
    parse: flag,
  },
  EXPORT_MAX_ATTESTATIONS: {
    description:
      'largest number of attestations one export bundle (POST /v1/attestations/export) may hold; larger selections get 413',
    default: '1000000',
    parse: intIn(1, 100_000_000),
  },
  EXPORT_CONCURRENCY: {
    description:
      'exports (POST /v1/attestations/export, audit exports, the UI) streaming at once per sidecar replica, at most half of them (at least 1) for one caller; more get 429 EXPORT_BUSY with Retry-After. Each reads the database while it streams and keeps its spool in /tmp (docs/export.md)',
    default: '2',
    parse: intIn(1, 64),
  },
  EXPORT_MIN_BYTES_PER_SECOND: {
    description:
      'an export (POST /v1/attestations/export, run evidence, the UI) whose client reads the bundle slower than this many bytes a second (before gzip), over two minutes of waiting for it, is closed so it cannot hold its EXPORT_CONCURRENCY slot for hours; one not read at all for a minute is closed too. The response declares it in x-export-min-rate; 0 turns the floor off (docs/export.md)',
    default: '32768',
    parse: intIn(0, 1_073_741_824),
  },
  SERVICE_CAPABILITY_TOKENS: {
    description:
      'Value 1 projects every capability chain as a W3C VC (application/vc+jwt) and a Biscuit v3 token, minted when the step is recorded and listed in the capability_tokens field of capability and step envelopes; 0 mints none and removes the field (docs/capabilities.md)',
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
  SCITT_TIMEOUT_MS: {
    description:
      'deadline of one request to the remote SCRAPI transparency service; a job whose request times out is retried with backoff',
    default: '30000',
    parse: intIn(100, 600_000),
  },
  TSA_URL: {
    description:
      'RFC 3161 time-stamping authority (POST application/timestamp-query) that time-stamps every AIBOM signature and C2PA manifest, and every record signature right after it is stored, so they verify after the signer certificate expires; unset: no time-stamps',
    parse: url,
  },
  TSA_TRUST_ANCHORS: {
    description:
      "PEM file of the root CA(s) the TSA's certificate must chain to; required with TSA_URL, and what the export guard, GET /v1/keys and `service-ctl verify` trust time-stamps from",
    parse: str,
  },
  TSA_DEADLINE_MS: {
    description:
      "how long one time-stamp may take, retries included; past it the AIBOM is retried later (reason TimestampUnavailable, docs/adr/0014) and a record's time-stamp job later (docs/adr/0015)",
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

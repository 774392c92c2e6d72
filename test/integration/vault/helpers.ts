import { createHash, randomBytes, randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';
import pg from 'pg';
import { inject } from 'vitest';
import {
  createVaultPool,
  migrate,
  openVault,
  type DsseEnvelope,
  type NewAttestation,
  type Vault,
} from '../../../src/vault/index.ts';

/** Superuser URL of the test cluster: from the harness (`provide`) or the environment. */
export function databaseUrl(): string {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  // The harness provides `DATABASE_URL` directly or inside its `stack` (test/global-setup.ts).
  const get = inject as (key: string) => unknown;
  const provided =
    get('DATABASE_URL') ??
    (get('stack') as { env?: { DATABASE_URL?: string } } | undefined)?.env?.DATABASE_URL;
  if (typeof provided === 'string' && provided !== '') return provided;
  throw new Error('DATABASE_URL is not set (integration tests need a PostgreSQL superuser URL)');
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates an empty database for one test file; `drop` removes it (and its connections). */
export async function freshDatabase(
  label: string,
): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `vault_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(databaseUrl(), name),
    name,
    drop: async () => {
      const c = new pg.Client({ connectionString: databaseUrl() });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface TestVault {
  readonly url: string;
  /** Runtime pool (role vault_writer). */
  readonly pool: pg.Pool;
  /** Pool connected as the superuser without changing role: the "owner" view. */
  readonly admin: pg.Pool;
  readonly vault: Vault;
  close(): Promise<void>;
}

/** A fresh, migrated database with a runtime pool, an owner pool and a bound Vault. */
export async function setupVault(label: string): Promise<TestVault> {
  const db = await freshDatabase(label);
  await migrate(db.url);
  const pool = createVaultPool(db.url, { max: 12 });
  const admin = new pg.Pool({ connectionString: db.url, max: 4 });
  // drop() terminates leftover sessions (DROP DATABASE ... FORCE): not a test failure.
  admin.on('error', () => undefined);
  const vault = await openVault(pool);
  return {
    url: db.url,
    pool,
    admin,
    vault,
    close: async () => {
      await vault.close();
      await admin.end();
      await db.drop();
    },
  };
}

/** What src/attest computes: sha256 over the RFC 8785 canonical JSON of the DSSE envelope. */
export function digestOf(envelope: DsseEnvelope): string {
  const canonical = canonicalize(envelope);
  if (canonical === undefined) throw new TypeError('envelope is not serializable');
  return `sha256:${createHash('sha256').update(canonical).digest('hex')}`;
}

export function sha256(s: string): string {
  return `sha256:${createHash('sha256').update(s).digest('hex')}`;
}

export interface FixtureOptions {
  readonly namespace?: string;
  readonly runId?: string;
  readonly stepId?: string | null;
  readonly kind?: NewAttestation['kind'];
  readonly subjects?: readonly string[];
  readonly artifactDigests?: readonly string[];
  readonly policyPack?: string | null;
  readonly policyVersion?: string | null;
  readonly capabilityTokenIds?: readonly string[];
  /** Approximate extra bytes of predicate, to make envelopes realistic in size. */
  readonly padding?: number;
}

/** A DSSE envelope around an in-toto statement (fake signature) and its vault record. */
export function attestation(o: FixtureOptions = {}): NewAttestation {
  const runId = o.runId ?? randomUUID();
  const stepId = o.stepId === undefined ? 'train' : o.stepId;
  const kind = o.kind ?? (stepId === null ? 'run' : 'step');
  const statement = {
    _type: 'https://in-toto.io/Statement/v1',
    subject: [{ name: `step:${runId}:${stepId ?? ''}`, digest: { sha256: randomBytes(32).toString('hex') } }],
    predicateType: 'https://aibom-vault.dev/step/v1',
    predicate: { runId, stepId, nonce: randomUUID(), pad: 'x'.repeat(o.padding ?? 0) },
  };
  const envelope: DsseEnvelope = {
    payloadType: 'application/vnd.in-toto+json',
    payload: Buffer.from(JSON.stringify(statement)).toString('base64'),
    signatures: [{ keyid: 'test-key', sig: randomBytes(72).toString('base64') }],
  };
  return {
    namespace: o.namespace ?? 'team-a',
    runId,
    stepId,
    kind,
    subjects:
      o.subjects ?? (stepId === null ? [`run:${runId}`] : [`run:${runId}`, `step:${runId}:${stepId}`]),
    artifactDigests: o.artifactDigests ?? [],
    predicateType: 'https://aibom-vault.dev/step/v1',
    policyPack: o.policyPack ?? null,
    policyVersion: o.policyVersion ?? null,
    capabilityTokenIds: o.capabilityTokenIds ?? [],
    envelope,
    digest: digestOf(envelope),
    signature: {
      algorithm: 'ECDSA_P256_SHA256',
      key_id: 'sha256:test-key',
      cert_chain_ref: `sha256:${'c'.repeat(64)}`,
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** SQLSTATE of a rejected promise (node-postgres puts it on `code`). */
export async function sqlstate(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

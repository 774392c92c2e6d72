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

/** The stack's logins (test/global-setup.ts): superuser, owner and runtime URLs of its database. */
function logins(): { superuser: string; owner: string; runtime: string } {
  const get = inject as (key: string) => unknown;
  const provided = (get('stack') as { database?: { superuser: string; owner: string; runtime: string } })
    ?.database;
  if (provided === undefined) throw new Error('integration tests need the stack (test/global-setup.ts)');
  return provided;
}

/** Superuser URL of the test cluster. */
export function databaseUrl(): string {
  return logins().superuser;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface FreshDatabase {
  /** The owner login (`vault_owner`, owns the database): migrations. */
  readonly url: string;
  readonly name: string;
  /** The runtime login (`vault_app`): owns nothing, member of vault_writer. */
  readonly runtime: string;
  /** The superuser: plays the attacker. */
  readonly superuser: string;
  drop(): Promise<void>;
}

/** Creates an empty database owned by the owner login for one test file; `drop` removes it. */
export async function freshDatabase(label: string): Promise<FreshDatabase> {
  const name = `vault_${label}_${randomBytes(4).toString('hex')}`;
  const { superuser, owner, runtime } = logins();
  const admin = new pg.Client({ connectionString: superuser });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} OWNER ${new URL(owner).username}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(owner, name),
    name,
    runtime: withDatabase(runtime, name),
    superuser: withDatabase(superuser, name),
    drop: async () => {
      const c = new pg.Client({ connectionString: superuser });
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
  /** The runtime login's URL (what the service's DATABASE_URL is). */
  readonly url: string;
  /** The owner login's URL. */
  readonly ownerUrl: string;
  /** Runtime pool (login vault_app, role vault_writer). */
  readonly pool: pg.Pool;
  /** Pool connected as the superuser without changing role: plays the attacker. */
  readonly admin: pg.Pool;
  readonly vault: Vault;
  close(): Promise<void>;
}

/** A fresh database migrated by its owner, a runtime pool, a superuser pool and a bound Vault. */
export async function setupVault(label: string): Promise<TestVault> {
  const db = await freshDatabase(label);
  await migrate(db.url);
  const pool = createVaultPool(db.runtime, { max: 12 });
  const admin = new pg.Pool({ connectionString: db.superuser, max: 4 });
  // drop() terminates leftover sessions (DROP DATABASE ... FORCE): not a test failure.
  admin.on('error', () => undefined);
  const vault = await openVault(pool);
  return {
    url: db.runtime,
    ownerUrl: db.url,
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
  const subjects =
    o.subjects ?? (stepId === null ? [`run:${runId}`] : [`run:${runId}`, `step:${runId}:${stepId}`]);
  // The statement names the record's subjects (an unlabelled statement binds those: the API checks).
  const statement = {
    _type: 'https://in-toto.io/Statement/v1',
    subject: subjects.map((name) => ({ name, digest: { sha256: randomBytes(32).toString('hex') } })),
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
    subjects,
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

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import pg from 'pg';
import { kubeconfigAccess, type KubeAccess } from '../../src/kube/access.ts';
import { migrate } from '../../src/vault/index.ts';
import type { StackUser } from '../../hack/stack/kube.ts';

export const stack = () => inject('stack');

export function kubeConfig(user: StackUser = 'admin'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(stack().kube.kubeconfigs[user]);
  return kc;
}

/**
 * The stack user's kubeconfig loaded as the service's processes load theirs (src/kube/access.ts),
 * for the clients the service itself would make; `kubeConfig` is client-node's, for test code.
 */
export function kubeAccess(user: StackUser = 'admin'): KubeAccess {
  const file = stack().kube.kubeconfigs[user];
  const access = kubeconfigAccess(readFileSync(file, 'utf8'), file);
  if (!access) throw new Error(`${file}: the stack's kubeconfigs need no exec plugin or proxy`);
  return access;
}

/** A DNS-1123 name unique to this test run, for namespaces and other objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** One test database as each login of docs/vault.md "Roles" (URLs of the same database). */
export interface TestDatabase {
  readonly name: string;
  /** The cluster's superuser: plays the attacker (disables triggers), drops the database. */
  readonly superuser: string;
  /** `vault_owner`, the database's owner: runs the migrations. */
  readonly owner: string;
  /** `vault_app`, the runtime login: owns nothing, may only become vault_writer. */
  readonly runtime: string;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A fresh database on the stack's PostgreSQL, owned by the owner login, as production has it;
 * migrated (as the owner) unless `migrated: false`.
 */
export async function freshDatabaseLogins(
  prefix = 't',
  options: { migrated?: boolean } = {},
): Promise<TestDatabase> {
  const { superuser, owner, runtime } = stack().database;
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: superuser });
  await admin.connect();
  try {
    await admin.query(`create database ${name} owner ${new URL(owner).username}`);
  } finally {
    await admin.end();
  }
  const db = {
    name,
    superuser: withDatabase(superuser, name),
    owner: withDatabase(owner, name),
    runtime: withDatabase(runtime, name),
  };
  if (options.migrated !== false) await migrate(db.owner);
  return db;
}

/**
 * A fresh, migrated database; returns the runtime login's URL (what the service's DATABASE_URL is).
 * `migrate` on it is a no-op (nothing pending needs only SELECT on schema_migrations).
 */
export async function freshDatabase(prefix = 't'): Promise<string> {
  return (await freshDatabaseLogins(prefix)).runtime;
}

/**
 * The stack's settings for services that run on another database: without TLOG_WITNESSES. The
 * stack's witness follows one vault per origin; a second database pushing checkpoints of the same
 * origin there is a split view that the witness refuses (and then it refuses the stack's own tree:
 * test/integration/transparency/stack-witness.test.ts is the one test that pushes to it).
 */
export function envForOtherDatabase(databaseUrl: string): Record<string, string> {
  const env = Object.fromEntries(
    Object.entries(stack().env).filter(([k]) => k !== 'TLOG_WITNESSES'),
  ) as Record<string, string>;
  return { ...env, DATABASE_URL: databaseUrl };
}

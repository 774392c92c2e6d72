import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { signatureMetadata, type KeySigner } from '../../../src/signing/index.ts';
import { buildSignedStatement } from '../../../src/transparency/statement.ts';
import { createVaultPool, openVault, type NewAttestation, type Vault } from '../../../src/vault/index.ts';
import { freshDatabaseLogins, stack } from '../../helpers/stack.ts';
import { attestationId, envelope } from '../../unit/transparency/fixtures.ts';

export interface TestDb {
  readonly url: string;
  /** Runtime pool (role vault_writer), as the service runs. */
  readonly pool: pg.Pool;
  /** Superuser pool, for what the runtime role may not do (and to simulate time passing). */
  readonly admin: pg.Pool;
  readonly vault: Vault;
  close(): Promise<void>;
}

/** A fresh database on the stack's PostgreSQL, migrated by its owner. */
export async function setupDb(label: string): Promise<TestDb> {
  const db = await freshDatabaseLogins(`scitt_${label}`);
  const pool = createVaultPool(db.runtime, { max: 12 });
  const admin = new pg.Pool({ connectionString: db.superuser, max: 4 });
  admin.on('error', () => undefined);
  const vault = await openVault(pool);
  return {
    url: db.runtime,
    pool,
    admin,
    vault,
    close: async () => {
      await vault.close();
      await admin.end();
      const c = new pg.Client({ connectionString: stack().database.superuser });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${db.name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A vault record around a really signed envelope. */
export function record(signer: KeySigner, namespace = 'team-a'): NewAttestation {
  const label = randomUUID();
  const { envelope: env, digest } = envelope(signer, label);
  return {
    namespace,
    kind: 'run',
    // As signed: the API serves a record only with the subjects its statement signs.
    subjects: [`run:${label}`],
    predicateType: 'https://vault.service.dev/attestations/test/v1',
    envelope: env,
    digest,
    signature: signatureMetadata(signer),
  };
}

/** A signed statement for a made-up attestation (the log does not care whether it is in the vault). */
export function statement(signer: KeySigner): Buffer {
  const { envelope: env, digest } = envelope(signer);
  return buildSignedStatement({
    attestationId: attestationId(),
    envelope: env,
    digest,
    signer,
    caCertificates: signer.caCertificates,
  }).bytes;
}

/** SQLSTATE of a rejected promise. */
export async function sqlstate(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

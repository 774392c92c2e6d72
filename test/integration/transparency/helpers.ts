import pg from 'pg';
import { signatureMetadata, type KeySigner } from '../../../src/signing/index.ts';
import { buildSignedStatement } from '../../../src/transparency/statement.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type NewAttestation,
  type Vault,
} from '../../../src/vault/index.ts';
import { freshDatabase, stack } from '../../helpers/stack.ts';
import { attestationId, envelope } from '../../unit/transparency/fixtures.ts';

export interface TestDb {
  readonly url: string;
  /** Runtime pool (role vault_writer), as the service runs. */
  readonly pool: pg.Pool;
  /** Owner pool, for what the runtime role may not do (and to simulate time passing). */
  readonly admin: pg.Pool;
  readonly vault: Vault;
  close(): Promise<void>;
}

/** A fresh, migrated database on the stack's PostgreSQL. */
export async function setupDb(label: string): Promise<TestDb> {
  const url = await freshDatabase(`scitt_${label}`);
  await migrate(url);
  const pool = createVaultPool(url, { max: 12 });
  const admin = new pg.Pool({ connectionString: url, max: 4 });
  const vault = await openVault(pool);
  return {
    url,
    pool,
    admin,
    vault,
    close: async () => {
      await vault.close();
      await admin.end();
      const c = new pg.Client({ connectionString: stack().env.DATABASE_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A vault record around a really signed envelope. */
export function record(signer: KeySigner, namespace = 'team-a'): NewAttestation {
  const { envelope: env, digest } = envelope(signer);
  return {
    namespace,
    kind: 'run',
    subjects: [`run:${digest.slice(7, 19)}`],
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

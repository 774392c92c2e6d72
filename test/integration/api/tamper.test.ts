/**
 * Tamper detection through the whole read path: one byte of a stored envelope changed behind the
 * append-only trigger (as the superuser could) is caught by the offline verifier on what the API
 * returns, by `service-ctl verify`, and by the chain walk.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { envelopeDigest, verifyRecord } from '../../../src/attest/index.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { stackApp } from '../../helpers/app.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, stack, uniqueName } from '../../helpers/stack.ts';

let url: string;
let vault: Vault;
let signer: KeySigner;
let stored: StoredAttestation[];

beforeAll(async () => {
  const db = await freshDatabaseLogins('tamper');
  url = db.superuser;
  vault = await openVault(createVaultPool(db.runtime));
  signer = signerFromPem(await generateDevPki());
  stored = await vault.attestations.append(runRecords(signer, uniqueName('tamper')).records);
});

afterAll(async () => {
  await vault?.close();
});

it('a changed byte in a stored envelope is reported by verify, service-ctl verify and the chain walk', async () => {
  const victim = stored[1]!;
  const payload = Buffer.from(victim.envelope.payload, 'base64');
  payload.writeUInt8(payload.readUInt8(20) ^ 0x01, 20);
  const su = new pg.Client({ connectionString: url });
  await su.connect();
  try {
    // The superuser bypasses the append-only trigger; the data itself must give it away.
    await su.query('ALTER TABLE attestations DISABLE TRIGGER attestations_append_only');
    await su.query(
      `UPDATE attestations SET envelope = jsonb_set(envelope, '{payload}', to_jsonb($1::text)) WHERE id = $2`,
      [payload.toString('base64'), victim.id],
    );
    await su.query('ALTER TABLE attestations ENABLE TRIGGER attestations_append_only');
  } finally {
    await su.end();
  }

  const app = await stackApp(vault, signer.caCertificates);
  try {
    const res = await app.inject({
      url: `/v1/attestations/${victim.id}`,
      headers: { authorization: `Bearer ${stack().kube.tokens.admin}` },
    });
    expect(res.statusCode).toBe(200);
    const record = res.json<Record<string, unknown>>();
    const verdict = verifyRecord(record, { publicKeys: [signer.publicKey] });
    expect(verdict.ok).toBe(false);
    expect(verdict.problems.map((p) => p.code)).toEqual(
      expect.arrayContaining(['DIGEST_MISMATCH', 'SIGNATURE_INVALID']),
    );

    const file = `${stack().root}/tampered-${victim.id}.json`;
    const key = `${stack().root}/tamper-key-${victim.id}.pem`;
    await writeFile(file, JSON.stringify(record));
    await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
    const cli = await promisify(execFile)(process.execPath, [
      `${repoRoot}/src/bin/service-ctl.ts`,
      'verify',
      file,
      '--key',
      key,
    ]).catch((e: { code: number; stdout: string }) => e);
    expect(cli).toMatchObject({ code: 1 });
    expect((cli as { stdout: string }).stdout).toContain('DIGEST_MISMATCH');
  } finally {
    await app.close();
  }

  const chain = await vault.attestations.verifyChain({ digestOf: envelopeDigest });
  expect(chain.ok).toBe(false);
  expect(chain.firstBroken).toMatchObject({ id: victim.id, reason: 'DIGEST_MISMATCH' });
});

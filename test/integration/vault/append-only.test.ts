import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLSTATE_APPEND_ONLY, SQLSTATE_INSUFFICIENT_PRIVILEGE } from '../../../src/vault/index.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { signerEntry } from '../../../src/export/keys.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { attestation, setupVault, sqlstate, type TestVault } from './helpers.ts';

describe('vault append-only enforcement', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('appendonly');
    await t.vault.attestations.append([attestation(), attestation()]);
    await t.vault.audit.record({
      actor: 'alice',
      action: 'attestations.export',
      namespace: 'team-a',
      attestationIds: [],
    });
    await t.vault.signers.record(
      signerEntry(signerFromPem(await generateDevPki()), { namespace: '', role: 'signer' }),
    );
  });
  afterAll(async () => {
    await t.close();
  });

  const rewrites = {
    attestations: [
      `UPDATE attestations SET namespace = 'evil'`,
      'DELETE FROM attestations',
      'TRUNCATE attestations',
    ],
    audit_log: [`UPDATE audit_log SET actor = 'mallory'`, 'DELETE FROM audit_log', 'TRUNCATE audit_log'],
    // A rotated-away certificate is still what its records name: never changed, never forgotten.
    signer_certificates: [
      `UPDATE signer_certificates SET chain_pem = ''`,
      'DELETE FROM signer_certificates',
      'TRUNCATE signer_certificates',
    ],
  };

  it('the runtime role lacks UPDATE, DELETE and TRUNCATE privileges (42501)', async () => {
    for (const sql of [...rewrites.attestations, ...rewrites.audit_log, ...rewrites.signer_certificates]) {
      expect(await sqlstate(t.pool.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
    }
    for (const sql of [
      'DELETE FROM vault_head',
      'TRUNCATE vault_head',
      'UPDATE vault_head SET singleton = false',
    ]) {
      expect(await sqlstate(t.pool.query(sql)), sql).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
    }
    expect(await sqlstate(t.pool.query('UPDATE vault_cursor_key SET key = key'))).toBe(
      SQLSTATE_INSUFFICIENT_PRIVILEGE,
    );
    expect(
      await sqlstate(t.pool.query('ALTER TABLE attestations DISABLE TRIGGER attestations_append_only')),
    ).toBe(SQLSTATE_INSUFFICIENT_PRIVILEGE);
    expect(await sqlstate(t.pool.query('SET session_replication_role = replica'))).toBe(
      SQLSTATE_INSUFFICIENT_PRIVILEGE,
    );
  });

  it('the owner (here a superuser) is stopped by the triggers (23001)', async () => {
    for (const sql of [...rewrites.attestations, ...rewrites.audit_log, ...rewrites.signer_certificates]) {
      expect(await sqlstate(t.admin.query(sql)), sql).toBe(SQLSTATE_APPEND_ONLY);
    }
    // Statement-level: even a rewrite that matches no row is refused.
    expect(await sqlstate(t.admin.query(`DELETE FROM attestations WHERE false`))).toBe(SQLSTATE_APPEND_ONLY);
    expect(await sqlstate(t.admin.query('DELETE FROM vault_head'))).toBe(SQLSTATE_APPEND_ONLY);
    const { rows } = await t.admin.query<{ n: string }>('SELECT count(*) AS n FROM attestations');
    expect(rows[0]!.n).toBe('2');
  });

  it('the chain head only moves forward onto a stored row, even for the owner', async () => {
    // The runtime role cannot write the head at all (test/integration/vault/roles.test.ts); these are
    // the guards that hold for every role, checked here as the superuser.
    expect(await sqlstate(t.admin.query('UPDATE vault_head SET last_seq = 0'))).toBe(SQLSTATE_APPEND_ONLY);
    expect(await sqlstate(t.admin.query('UPDATE vault_head SET last_seq = 99'))).toBe(SQLSTATE_APPEND_ONLY);
    expect(
      await sqlstate(
        t.admin.query(
          `UPDATE vault_head SET last_digest = 'sha256:${'f'.repeat(64)}', last_seq = last_seq + 1`,
        ),
      ),
    ).toBe(SQLSTATE_APPEND_ONLY);
  });

  it('the runtime role can still read, append and audit', async () => {
    const [s] = await t.vault.attestations.append([attestation()]);
    expect(s!.seq).toBe(3);
    const audit = await t.vault.audit.record({
      actor: 'bob',
      action: 'artifact.download',
      namespace: 'team-a',
      object: 'runs/x/aibom.json',
      manifestDigest: `sha256:${'d'.repeat(64)}`,
      attestationIds: [s!.id],
      details: { bytes: 123 },
    });
    expect(audit.id).toBeGreaterThan(0);
    const { rows } = await t.pool.query<{ actor: string }>('SELECT actor FROM audit_log ORDER BY id');
    expect(rows.map((r) => r.actor)).toEqual(['alice', 'bob']);
  });
});

describe('signer certificate history', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('signers');
  });
  afterAll(async () => {
    await t.close();
  });

  it('records each certificate once, per owner, in the order first used; reads it back whole', async () => {
    const [a, b, c] = await Promise.all([generateDevPki(), generateDevPki(), generateDevPki()]);
    const service = [a, b].map((p) => signerEntry(signerFromPem(p), { namespace: '', role: 'signer' }));
    const customer = signerEntry(signerFromPem(c), { namespace: 'team-a', role: 'signer' });
    for (const row of [service[0]!, service[1]!, customer]) await t.vault.signers.record(row);
    await t.vault.signers.record(service[0]!); // insert-once: a second record changes nothing
    const listed = await t.vault.signers.list(['']);
    expect(listed.map((r) => r.certRef)).toEqual(service.map((r) => r.certRef));
    expect((await t.vault.signers.list(['team-a'])).map((r) => r.keyId)).toEqual([customer.keyId]);
    expect(await t.vault.signers.list(['team-b'])).toEqual([]);
    // Resolved by cert_chain_ref or key id, only within the namespaces asked for.
    const got = await t.vault.signers.resolve(customer.certRef, ['team-a']);
    expect(got).toEqual([expect.objectContaining({ ...customer })]);
    expect(got[0]!.firstUsedAt).toBeInstanceOf(Date);
    expect(await t.vault.signers.resolve(customer.keyId, ['team-a'])).toHaveLength(1);
    expect(await t.vault.signers.resolve(customer.certRef, [''])).toEqual([]);
    // The formats are the table's: a reference that is no sha256 is refused.
    expect(
      await sqlstate(
        t.admin.query(
          `INSERT INTO signer_certificates (cert_ref, key_id, namespace, role, chain_pem)
           VALUES ('not-a-ref', 'sha256:${'2'.repeat(64)}', '', 'signer', '')`,
        ),
      ),
    ).toBe('23514');
  });
});

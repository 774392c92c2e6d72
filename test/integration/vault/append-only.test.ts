import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLSTATE_APPEND_ONLY, SQLSTATE_INSUFFICIENT_PRIVILEGE } from '../../../src/vault/index.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { signerCertificateOf } from '../../../src/recorder/signers.ts';
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
    const row = signerCertificateOf(signerFromPem(await generateDevPki()), { scope: 'service' })!;
    expect(await t.vault.signers.record(row)).toBe(true);
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

  it('the chain head only moves forward onto a stored row, even for the runtime role', async () => {
    expect(await sqlstate(t.pool.query('UPDATE vault_head SET last_seq = 0'))).toBe(SQLSTATE_APPEND_ONLY);
    expect(await sqlstate(t.pool.query('UPDATE vault_head SET last_seq = 99'))).toBe(SQLSTATE_APPEND_ONLY);
    expect(
      await sqlstate(
        t.pool.query(
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

  it('records each certificate once, per owner, in the order first seen; reads it back whole', async () => {
    const [a, b, c] = await Promise.all([generateDevPki(), generateDevPki(), generateDevPki()]);
    const service = [a, b].map((p) => signerCertificateOf(signerFromPem(p), { scope: 'service' })!);
    const customer = signerCertificateOf(signerFromPem(c), { scope: 'customer', namespace: 'team-a' })!;
    for (const row of [service[0]!, service[1]!, customer])
      expect(await t.vault.signers.record(row)).toBe(true);
    expect(await t.vault.signers.record(service[0]!)).toBe(false);
    const listed = await t.vault.signers.list({ scope: 'service' });
    expect(listed.map((r) => r.certChainRef)).toEqual(service.map((r) => r.certChainRef));
    expect(
      (await t.vault.signers.list({ scope: 'customer', namespace: 'team-a' })).map((r) => r.keyId),
    ).toEqual([customer.keyId]);
    expect(await t.vault.signers.list({ scope: 'customer', namespace: 'team-b' })).toEqual([]);
    const got = await t.vault.signers.get(customer.certChainRef);
    expect(got).toMatchObject({ ...customer, notBefore: customer.notBefore, notAfter: customer.notAfter });
    expect(got!.firstSeen).toBeInstanceOf(Date);
    // The scope rules are the table's: a customer row needs its namespace.
    expect(
      await sqlstate(
        t.admin.query(
          `INSERT INTO signer_certificates (cert_chain_ref, key_id, scope, algorithm, chain_pem, not_before, not_after)
           VALUES ('sha256:${'1'.repeat(64)}', 'sha256:${'2'.repeat(64)}', 'customer', 'ED25519', '', now(), now())`,
        ),
      ),
    ).toBe('23514');
  });
});

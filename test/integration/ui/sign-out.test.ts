/**
 * Sign-out ends a UI session on the server (issue 22, left alone last round): a copy of the
 * session cookie taken before sign-out no longer opens the UI nor /v1 (exports included), on any
 * replica. Two app instances (two "replicas", each with its own PostgreSQL pool) over one vault on
 * the real stack; real TokenReview/SubjectAccessReview. The revocations are bounded by the session
 * lifetime, the runtime login cannot edit them, and a vault that does not answer refuses the
 * session rather than letting it through.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { SESSION_COOKIE } from '../../../src/http/ui/session.ts';
import { stackApp } from '../../helpers/app.ts';
import { bindUser, createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, stack, uniqueName } from '../../helpers/stack.ts';
import { UiBrowser } from '../../helpers/ui-browser.ts';

const ns = uniqueName('sign-out');
const replicas: { vault: Vault; app: FastifyInstance; url: string }[] = [];
let runtime: string;

async function replica(): Promise<(typeof replicas)[number]> {
  const vault = await openVault(createVaultPool(runtime));
  const app = await stackApp(vault, [], { signer: signer! });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const r = { vault, app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
  replicas.push(r);
  return r;
}

let signer: ReturnType<typeof signerFromPem> | undefined;

beforeAll(async () => {
  runtime = (await freshDatabaseLogins('sign_out')).runtime;
  signer = signerFromPem(await generateDevPki());
  await createNamespace(ns);
  await bindUser('alice', 'aibom-vault-auditor', ns);
  await replica();
  await replica();
  await replicas[0]!.vault.attestations.append(runRecords(signer, ns).records);
});

afterAll(async () => {
  for (const r of replicas) {
    await r.app.close();
    await r.vault.close().catch(() => undefined);
  }
});

/** What a holder of `cookie` gets from `base`: the UI, a /v1 read and an export (with the CSRF token). */
async function asHolder(base: string, cookie: string, csrf: string) {
  const thief = new UiBrowser(base);
  thief.jar.set(SESSION_COOKIE, cookie);
  const ui = await thief.request('/ui/runs');
  const read = await thief.request('/v1/runs');
  const exported = await thief.request('/v1/attestations/export', {
    method: 'POST',
    json: { namespaces: [ns] },
    headers: { 'x-csrf-token': csrf },
  });
  return { ui: ui.status, location: ui.location, read: read.status, exported: exported.status };
}

describe('sign-out', () => {
  it('ends the session on every replica: a copied cookie opens neither the UI nor /v1 afterwards', async () => {
    const [one, two] = replicas;
    const user = new UiBrowser(one!.url);
    await user.signIn('alice');
    const page = await user.request('/ui/runs');
    expect(page.status).toBe(200);
    const csrf = UiBrowser.csrfOf(page.text);
    const copy = user.jar.get(SESSION_COOKIE)!;
    // Before sign-out the copy works on both replicas, exports included.
    for (const r of [one!, two!]) {
      expect(await asHolder(r.url, copy, csrf)).toMatchObject({ ui: 200, read: 200, exported: 200 });
    }
    // Another session of the same user, signed in elsewhere.
    const other = new UiBrowser(two!.url);
    await other.signIn('alice');

    expect(await user.request('/ui/sign-out', { method: 'POST', form: { _csrf: csrf } })).toMatchObject({
      status: 303,
      location: '/ui/sign-in',
    });
    expect(user.jar.has(SESSION_COOKIE)).toBe(false);
    for (const r of [one!, two!]) {
      const after = await asHolder(r.url, copy, csrf);
      expect(after, r.url).toMatchObject({ ui: 303, read: 401, exported: 401 });
      expect(after.location).toMatch(/^\/ui\/sign-in/);
    }
    // Only that session ended: the other one and the token itself still work.
    expect((await other.request('/ui/runs')).status).toBe(200);
    const bearer = await fetch(`${two!.url}/v1/runs`, {
      headers: { authorization: `Bearer ${stack().kube.tokens.alice}` },
    });
    expect(bearer.status).toBe(200);
  });

  it('keeps revocations only while their cookies could still be opened, and the runtime cannot edit them', async () => {
    const { vault } = replicas[0]!;
    const pool = createVaultPool(runtime, { max: 1 }); // the runtime login, as the service connects
    try {
      const count = async (sid: string) =>
        Number(
          (
            await pool.query<{ n: string }>(
              'SELECT count(*) AS n FROM ui_session_revocations WHERE sid = $1',
              [sid],
            )
          ).rows[0]!.n,
        );
      const expired = 'expired-session-id-0001';
      await vault.uiSessions.revoke(expired, new Date(Date.now() - 10 * 60_000));
      expect(await count(expired)).toBe(1);
      // The next revocation prunes it: its cookie expired ten minutes ago, past the clocks' margin.
      const far = 'far-future-session-0001';
      await vault.uiSessions.revoke(far, new Date(Date.now() + 365 * 86_400_000));
      expect(await count(expired)).toBe(0);
      const { rows } = await pool.query<{ expires_at: Date }>(
        'SELECT expires_at FROM ui_session_revocations WHERE sid = $1',
        [far],
      );
      expect(rows[0]!.expires_at.getTime()).toBeLessThanOrEqual(Date.now() + 86_400_000 + 60_000);
      expect(await vault.uiSessions.isRevoked(far)).toBe(true);
      for (const sql of [
        'DELETE FROM ui_session_revocations',
        "UPDATE ui_session_revocations SET expires_at = now() WHERE sid = 'x'",
        "INSERT INTO ui_session_revocations (sid, expires_at) VALUES ('forged-session-id-01', now())",
        'TRUNCATE ui_session_revocations',
      ]) {
        await expect(pool.query(sql), sql).rejects.toMatchObject({ code: '42501' });
      }
    } finally {
      await pool.end();
    }
  });

  it('refuses a session, with 503, while the vault cannot say whether it was signed out', async () => {
    const r = await replica();
    const user = new UiBrowser(r.url);
    await user.signIn('alice');
    expect((await user.request('/v1/runs')).status).toBe(200);
    await r.vault.close(); // this replica's pool is gone: the revocation check cannot be answered
    const res = await user.request('/v1/runs');
    expect(res.status).toBe(503);
    expect(JSON.parse(res.text)).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
  });
});

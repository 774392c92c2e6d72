import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { authorizeBiscuit, readBiscuit } from '../../../src/capability/biscuit.ts';
import { credentialShapeProblem, verifyCredential } from '../../../src/capability/vc.ts';
import { verifyCapabilities } from '../../../src/capability/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { capabilityEnvelopes, RUN_ID, tokenOf, withToken } from '../../helpers/capabilities.ts';

/** Flips one character in the middle of a base64url token (a signed byte changes). */
function tamper(token: string, at = Math.floor(token.length / 2)): string {
  const c = token[at] === 'A' ? 'B' : 'A';
  return token.slice(0, at) + c + token.slice(at + 1);
}

describe.each(['ECDSA_P256_SHA256', 'ED25519'] as const)('capability tokens (%s signer)', (alg) => {
  let signer: KeySigner;
  let other: KeySigner;
  beforeAll(async () => {
    signer = signerFromPem(await generateDevPki({ leafAlgorithm: alg }));
    other = signerFromPem(await generateDevPki({ leafAlgorithm: alg }));
  });

  it('mints a VC 2.0 credential (ES256/EdDSA, kid = key id) saying who approved which step under which scope', async () => {
    const { capability } = await capabilityEnvelopes(signer);
    const vc = verifyCredential(tokenOf(capability, 'vc+jwt'), [signer.publicKey]);
    expect(vc.header).toMatchObject({
      alg: alg === 'ED25519' ? 'EdDSA' : 'ES256',
      kid: signer.keyId,
      typ: 'vc+jwt',
    });
    expect(credentialShapeProblem(vc.claims)).toBeUndefined();
    expect(vc.claims.credentialSubject).toMatchObject({
      step: `step:${RUN_ID}:retrieve`,
      scope: 'kb:read',
      grantedBy: 'team:support-platform',
      approvedBy: 'user:alice',
    });
    expect((vc.claims.evidence as { id: string }[]).map((e) => e.id)).toEqual([
      `urn:uuid:${capability.id}`,
      expect.stringMatching(/^urn:uuid:/),
    ]);
  });

  it('mints a Biscuit with an authority block and one attenuation block per delegation, verifiable with the root key alone', async () => {
    const { capability } = await capabilityEnvelopes(signer);
    const root = (capability.capability_chain![0] as { root: { biscuit_root_key: string } }).root
      .biscuit_root_key;
    const b = await readBiscuit(tokenOf(capability, 'biscuit'), root);
    expect(b.blocks).toHaveLength(2);
    expect(b.claims.links.map((l) => l.approvedBy)).toEqual(['user:ciso', 'user:alice']);
    const policy = (op: string, approver: string) =>
      `time(${new Date().toISOString()}); operation("${op}");
       allow if step("step:${RUN_ID}:retrieve"), delegation($i, $g, "kb:read"), approval($i, "${approver}");`;
    await expect(
      authorizeBiscuit(tokenOf(capability, 'biscuit'), root, policy('kb:read', 'user:alice')),
    ).resolves.toBe(0);
    // The attenuation blocks restrict operations to kb:read; the approval must be the signed one.
    await expect(
      authorizeBiscuit(tokenOf(capability, 'biscuit'), root, policy('kb:write', 'user:alice')),
    ).rejects.toBeDefined();
    await expect(
      authorizeBiscuit(tokenOf(capability, 'biscuit'), root, policy('kb:read', 'user:mallory')),
    ).rejects.toBeDefined();
  });

  it('verifies both records offline and reports the chain', async () => {
    const { capability, step } = await capabilityEnvelopes(signer);
    for (const record of [capability, step]) {
      const r = await verifyCapabilities(record, { publicKeys: [signer.publicKey] });
      expect(r.problems).toEqual([]);
      expect(r.lines).toEqual([
        expect.stringContaining(
          `step:${RUN_ID}:retrieve under kb:read: kb granted by org:acme-it, approved by user:ciso → kb:read granted by team:support-platform, approved by user:alice`,
        ),
      ]);
      expect(r.chains[0]!.tokens).toEqual(['vc+jwt', 'biscuit']);
    }
  });

  it('rejects a tampered VC and a tampered Biscuit', async () => {
    const { capability, step } = await capabilityEnvelopes(signer);
    for (const record of [capability, step]) {
      for (const format of ['vc+jwt', 'biscuit'] as const) {
        const r = await verifyCapabilities(withToken(record, format, tamper(tokenOf(record, format))), {
          publicKeys: [signer.publicKey],
        });
        expect(r.ok).toBe(false);
        expect(r.problems.map((p) => p.code)).toEqual([
          expect.stringMatching(/^TOKEN_(SIGNATURE_INVALID|UNTRUSTED|MALFORMED)$/),
        ]);
      }
    }
  });

  it("rejects tokens of another namespace's key, even when that key is trusted too", async () => {
    const mine = await capabilityEnvelopes(signer);
    const theirs = await capabilityEnvelopes(other);
    for (const format of ['vc+jwt', 'biscuit'] as const) {
      const r = await verifyCapabilities(
        withToken(mine.capability, format, tokenOf(theirs.capability, format)),
        {
          publicKeys: [signer.publicKey, other.publicKey],
        },
      );
      expect(r.problems.map((p) => p.code)).toEqual([expect.stringMatching(/^TOKEN_(UNTRUSTED|MISMATCH)$/)]);
    }
    // Tokens minted with another key for this record's chain.
    const forged = await capabilityEnvelopes(signer, { tokensSigner: other });
    const r = await verifyCapabilities(forged.capability, {
      publicKeys: [signer.publicKey, other.publicKey],
    });
    expect(r.problems.map((p) => p.code)).toEqual(['TOKEN_UNTRUSTED', 'TOKEN_UNTRUSTED']);
  });

  it('rejects a widened chain, in the signed record and in every token', async () => {
    const widened = await capabilityEnvelopes(signer, {
      chain: [
        { scope: 'kb:read', grantedBy: 'org:acme-it', approvedBy: 'user:ciso' },
        { scope: 'kb', grantedBy: 'team:support-platform', approvedBy: 'user:alice' },
      ],
    });
    const r = await verifyCapabilities(widened.capability, { publicKeys: [signer.publicKey] });
    expect(r.problems.map((p) => p.code)).toEqual(['SCOPE_WIDENED', 'SCOPE_WIDENED', 'SCOPE_WIDENED']);
    const s = await verifyCapabilities(widened.step, { publicKeys: [signer.publicKey] });
    expect(s.problems.map((p) => p.code)).toContain('SCOPE_WIDENED');
  });

  it('refuses an expired VC at the current time but verifies it at its record time', async () => {
    const old = await capabilityEnvelopes(signer, {
      createdAt: new Date('2020-01-01T00:00:00Z'),
      lifetimeMs: 1000,
    });
    expect(() => verifyCredential(tokenOf(old.capability, 'vc+jwt'), [signer.publicKey])).toThrow(
      expect.objectContaining({ code: 'TOKEN_EXPIRED' }),
    );
    expect((await verifyCapabilities(old.capability, { publicKeys: [signer.publicKey] })).ok).toBe(true);
  });
});

describe('capability token errors', () => {
  it('quote none of the token: a hostile kid, typ or alg, or unparsable Biscuit bytes, give fixed text', async () => {
    const signer = signerFromPem(await generateDevPki());
    const { capability } = await capabilityEnvelopes(signer);
    const [h, p, sig] = tokenOf(capability, 'vc+jwt').split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString('utf8')) as Record<string, unknown>;
    const hostile = '<script>alert(1)</script>\u001b[31m\u0000';
    const withHeader = (over: Record<string, unknown>) =>
      `${Buffer.from(JSON.stringify({ ...header, ...over })).toString('base64url')}.${p!}.${sig!}`;
    const messages: string[] = [];
    for (const token of [
      withHeader({ kid: hostile }),
      withHeader({ typ: hostile }),
      withHeader({ alg: hostile }),
    ]) {
      try {
        verifyCredential(token, [signer.publicKey]);
        expect.unreachable('a hostile header verified');
      } catch (err) {
        messages.push((err as Error).message);
      }
    }
    await readBiscuit(
      Buffer.from(`\x12${hostile}`.repeat(8)).toString('base64url'),
      `ed25519/${'ab'.repeat(32)}`,
    ).then(
      () => expect.unreachable('junk read as a Biscuit'),
      (err: Error) => messages.push(err.message),
    );
    expect(messages).toHaveLength(4);
    for (const m of messages) {
      expect(m).not.toMatch(/script|alert/);
      expect([...m].every((c) => c >= ' ')).toBe(true);
      expect(m.length).toBeLessThan(80);
    }
  });
});

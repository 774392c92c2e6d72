import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../hack/dev-pki.ts';
import { repoRoot } from '../../hack/stack/stack.ts';
import { signerFromPem, type KeySigner } from '../../src/signing/index.ts';
import { verifyCapabilities } from '../../src/capability/verify.ts';
import {
  appendBiscuitBlock,
  capabilityEnvelopes,
  RUN_ID,
  tokenOf,
  withToken,
} from '../helpers/capabilities.ts';

/**
 * The capability-token projections checked by implementations that share none of our code:
 * - Biscuit: the Java implementation (org.biscuitsec:biscuit, Maven Central) verifies the signature
 *   chain under the root public key alone and runs the sample authorizer of docs/capabilities.md;
 * - VC: joserfc (PyPI) verifies the JWS and the registered claims, and the script checks the VC 2.0
 *   data-model shape. We assemble the JWS by hand (src/capability/vc.ts), so no JOSE library of
 *   ours is involved.
 * Both are built by hack/ensure-verifiers.sh (hack/install.sh runs it) into the cache.
 */
const run = promisify(execFile);
let dir: string;
let biscuitJava: string;
let python: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'caps-conformance-'));
  const { stdout } = await run('bash', [join(repoRoot, 'hack/ensure-verifiers.sh')]);
  const paths = Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=') as [string, string]),
  );
  biscuitJava = paths['biscuit-java']!;
  python = paths['vc-python']!;
}, 600_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const outcome = (p: Promise<{ stdout: string }>) =>
  p.then(
    (r) => r.stdout.trim(),
    (e: { stdout?: string; message?: string }) => (e.stdout ?? e.message ?? 'failed').trim(),
  );

/**
 * The sample authorizer of docs/capabilities.md: "step S was approved by X for scope Y", after a
 * deny policy that refuses any chain in which a delegation widens the one before it.
 */
const samplePolicy = (step: string, approver: string, scope: string, operation = scope) =>
  [
    `time(${new Date().toISOString()});`,
    `operation("${operation}");`,
    'deny if delegation($i, $g, $outer), delegation($j, $h, $inner), $j == $i + 1, $outer != "*", $inner != $outer, !$inner.starts_with($outer + ":");',
    `allow if step("${step}"), delegation($i, $granter, "${scope}"), approval($i, "${approver}");`,
  ].join('\n');

async function java(rootKey: string, token: string, policy: string): Promise<string> {
  const file = join(dir, `policy-${Math.random().toString(36).slice(2)}.dl`);
  await writeFile(file, policy);
  const hex = rootKey.replace(/^ed25519\//, '');
  return outcome(
    run('java', ['-cp', `${biscuitJava}/classes:${biscuitJava}/lib/*`, 'BiscuitVerify', hex, token, file]),
  );
}

async function joserfc(signer: KeySigner, token: string): Promise<string> {
  const pem = join(dir, `${signer.keyId.slice(7, 23)}.pem`);
  await writeFile(pem, signer.publicKey.export({ type: 'spki', format: 'pem' }));
  return outcome(run(python, [join(repoRoot, 'test/conformance/capability/vc_verify.py'), pem, token]));
}

function rootOf(envelope: { capability_chain: unknown[] | null }): string {
  return (envelope.capability_chain![0] as { root: { biscuit_root_key: string } }).root.biscuit_root_key;
}

function tamper(token: string): string {
  const at = Math.floor(token.length / 2);
  return token.slice(0, at) + (token[at] === 'A' ? 'B' : 'A') + token.slice(at + 1);
}

describe.each(['ECDSA_P256_SHA256', 'ED25519'] as const)(
  'capability tokens, independent verifiers (%s signer)',
  (alg) => {
    let signer: KeySigner;
    let other: KeySigner;
    const step = `step:${RUN_ID}:retrieve`;
    beforeAll(async () => {
      signer = signerFromPem(await generateDevPki({ leafAlgorithm: alg }));
      other = signerFromPem(await generateDevPki({ leafAlgorithm: alg }));
    });

    it('Java Biscuit accepts the token under its root key and the sample policy allows the approved scope', async () => {
      const { capability } = await capabilityEnvelopes(signer);
      const token = tokenOf(capability, 'biscuit');
      expect(await java(rootOf(capability), token, samplePolicy(step, 'user:alice', 'kb:read'))).toBe('OK 1');
      // The root's delegation of kb to org:acme-it, approved by the CISO, holds too, for an operation
      // within every link (kb:read); `kb` itself is beyond the step's attenuated grant.
      expect(await java(rootOf(capability), token, samplePolicy(step, 'user:ciso', 'kb', 'kb:read'))).toBe(
        'OK 1',
      );
      expect(await java(rootOf(capability), token, samplePolicy(step, 'user:ciso', 'kb', 'kb'))).toMatch(
        /^FAIL .*FailedLogic/,
      );
    });

    it('Java Biscuit refuses another approver, an operation outside the attenuated scope, another step', async () => {
      const { capability } = await capabilityEnvelopes(signer);
      const token = tokenOf(capability, 'biscuit');
      expect(await java(rootOf(capability), token, samplePolicy(step, 'user:mallory', 'kb:read'))).toMatch(
        /^FAIL /,
      );
      expect(
        await java(rootOf(capability), token, samplePolicy(step, 'user:alice', 'kb:read', 'kb:write')),
      ).toMatch(/^FAIL .*FailedLogic/);
      expect(
        await java(rootOf(capability), token, samplePolicy(`step:${RUN_ID}:other`, 'user:alice', 'kb:read')),
      ).toMatch(/^FAIL /);
    });

    it("Java Biscuit refuses a tampered token and another namespace's token", async () => {
      const { capability } = await capabilityEnvelopes(signer);
      const theirs = await capabilityEnvelopes(other);
      const policy = samplePolicy(step, 'user:alice', 'kb:read');
      expect(await java(rootOf(capability), tamper(tokenOf(capability, 'biscuit')), policy)).toMatch(
        /^FAIL /,
      );
      expect(await java(rootOf(capability), tokenOf(theirs.capability, 'biscuit'), policy)).toMatch(
        /^FAIL .*Signature/i,
      );
      expect(await java(rootOf(theirs.capability), tokenOf(theirs.capability, 'biscuit'), policy)).toBe(
        'OK 1',
      );
    });

    it('Java Biscuit refuses a widened chain: the deny policy matches, and block 1 keeps kb:write out', async () => {
      // A chain a forged or buggy signer would sign: kb:read delegated on as kb.
      const widened = await capabilityEnvelopes(signer, {
        chain: [
          { scope: 'kb:read', grantedBy: 'org:acme-it', approvedBy: 'user:ciso' },
          { scope: 'kb', grantedBy: 'team:support-platform', approvedBy: 'user:alice' },
        ],
      });
      const token = tokenOf(widened.capability, 'biscuit');
      // Even for an operation every block admits, the sample authorizer's deny policy (0) refuses it.
      expect(
        await java(rootOf(widened.capability), token, samplePolicy(step, 'user:alice', 'kb', 'kb:read')),
      ).toMatch(/^FAIL .*Deny\(0\)/);
      // Without that policy the attenuation still holds: block 1 restricts to kb:read.
      const allowOnly = samplePolicy(step, 'user:alice', 'kb', 'kb:write')
        .split('\n')
        .filter((l) => !l.startsWith('deny'))
        .join('\n');
      expect(await java(rootOf(widened.capability), token, allowOnly)).toMatch(/^FAIL .*FailedLogic/);
    });

    it('Java Biscuit and our verifier agree on blocks a holder appended: a narrowing block narrows, a widening claim gives nothing', async () => {
      // Issue 22 item 19: our verifier reported a legitimately narrowing appended block as
      // SCOPE_WIDENED. Java verifies the appended token under the root alone and shows what the
      // block does: only the narrower operation is allowed.
      const { capability } = await capabilityEnvelopes(signer);
      const root = rootOf(capability);
      const narrowed = await appendBiscuitBlock(
        tokenOf(capability, 'biscuit'),
        root,
        'check if operation($op), $op === "kb:read:faq";',
      );
      expect(await java(root, narrowed, samplePolicy(step, 'user:alice', 'kb:read', 'kb:read:faq'))).toBe(
        'OK 1',
      );
      expect(
        await java(root, narrowed, samplePolicy(step, 'user:alice', 'kb:read', 'kb:read:other')),
      ).toMatch(/^FAIL .*FailedLogic/);
      const ours = await verifyCapabilities(withToken(capability, 'biscuit', narrowed), {
        publicKeys: [signer.publicKey],
      });
      expect(ours.problems).toEqual([]);
      // A block claiming a delegation of all of kb: Biscuit still refuses kb:write (the service's
      // blocks keep kb:read), and our verifier refuses the claim itself.
      const claimed = await appendBiscuitBlock(
        tokenOf(capability, 'biscuit'),
        root,
        'link(2, "team:helpdesk", "kb"); check if operation($op), $op === "kb" or operation($op), $op.starts_with("kb:");',
      );
      expect(await java(root, claimed, samplePolicy(step, 'user:alice', 'kb:read', 'kb:write'))).toMatch(
        /^FAIL .*FailedLogic/,
      );
      const refused = await verifyCapabilities(withToken(capability, 'biscuit', claimed), {
        publicKeys: [signer.publicKey],
      });
      expect(refused.problems.map((p) => p.code)).toEqual(['SCOPE_WIDENED']);
    });

    it('joserfc accepts the VC-JWT (signature, kid, exp/nbf/iat) and its VC 2.0 shape', async () => {
      const { capability, step: stepEnvelope } = await capabilityEnvelopes(signer);
      expect(await joserfc(signer, tokenOf(capability, 'vc+jwt'))).toBe(`OK ${signer.keyId}`);
      expect(await joserfc(signer, tokenOf(stepEnvelope, 'vc+jwt'))).toBe(`OK ${signer.keyId}`);
    });

    it("joserfc refuses a tampered VC, another namespace's VC, and an expired one", async () => {
      const { capability } = await capabilityEnvelopes(signer);
      const theirs = await capabilityEnvelopes(other);
      const old = await capabilityEnvelopes(signer, {
        createdAt: new Date('2020-01-01T00:00:00Z'),
        lifetimeMs: 1000,
      });
      expect(await joserfc(signer, tamper(tokenOf(capability, 'vc+jwt')))).toMatch(/^FAIL /);
      expect(await joserfc(signer, tokenOf(theirs.capability, 'vc+jwt'))).toMatch(/^FAIL /);
      expect(await joserfc(signer, tokenOf(old.capability, 'vc+jwt'))).toMatch(
        /^FAIL .*(expired|Expired|exp)/,
      );
      const widened = await capabilityEnvelopes(signer, {
        chain: [
          { scope: 'kb:read', grantedBy: 'org:acme-it', approvedBy: 'user:ciso' },
          { scope: 'kb', grantedBy: 'team:support-platform', approvedBy: 'user:alice' },
        ],
      });
      expect(await joserfc(signer, tokenOf(widened.capability, 'vc+jwt'))).toBe(
        'FAIL delegation widens kb:read to kb',
      );
    });
  },
);

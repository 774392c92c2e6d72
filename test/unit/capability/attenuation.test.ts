import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { authorizeBiscuit, readBiscuit } from '../../../src/capability/biscuit.ts';
import { verifyCapabilities } from '../../../src/capability/verify.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  appendBiscuitBlock,
  biscuitRootOf,
  capabilityEnvelopes,
  RUN_ID,
  tokenOf,
  withToken,
} from '../../helpers/capabilities.ts';

/**
 * Issue 22 item 19: a Biscuit whose holder appended a legitimately narrowing block (Biscuit
 * attenuation: no key needed) was reported SCOPE_WIDENED. Blocks after the service's own may only
 * narrow: a checks-only block always does; a block restating a further link must stay within the
 * last signed scope (kb:read here), and one that claims more is still SCOPE_WIDENED.
 */
let signer: KeySigner;
let envelopes: Awaited<ReturnType<typeof capabilityEnvelopes>>;
let root: string;
beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
  envelopes = await capabilityEnvelopes(signer);
  root = biscuitRootOf(envelopes.capability);
});

const trust = () => ({ publicKeys: [signer.publicKey] });
const narrowCheck = 'check if operation($op), $op === "kb:read:faq";';
const link = (scope: string) =>
  `link(2, "team:helpdesk", "${scope}"); check if operation($op), $op === "${scope}" or operation($op), $op.starts_with("${scope}:");`;

async function appended(source: string) {
  const token = await appendBiscuitBlock(tokenOf(envelopes.capability, 'biscuit'), root, source);
  return { token, record: withToken(envelopes.capability, 'biscuit', token) };
}

describe('a Biscuit with blocks appended by its holder', () => {
  it('a checks-only block narrows: the chain verifies, and the token allows only the narrower operation', async () => {
    const { token, record } = await appended(narrowCheck);
    expect((await readBiscuit(token, root)).blocks).toHaveLength(3);
    const r = await verifyCapabilities(record, trust());
    expect(r.problems).toEqual([]);
    expect(r.chains[0]!.tokens).toEqual(['vc+jwt', 'biscuit']);
    const policy = (op: string) =>
      `time(${new Date().toISOString()}); operation("${op}"); allow if step("step:${RUN_ID}:retrieve");`;
    await expect(authorizeBiscuit(token, root, policy('kb:read:faq'))).resolves.toBe(0);
    await expect(authorizeBiscuit(token, root, policy('kb:read:other'))).rejects.toBeDefined();
  });

  it('a block delegating further, within the last signed scope, narrows too', async () => {
    for (const scope of ['kb:read', 'kb:read:faq']) {
      const { record } = await appended(link(scope));
      expect((await verifyCapabilities(record, trust())).problems, scope).toEqual([]);
    }
  });

  it('a block claiming a delegation wider than the last signed scope: SCOPE_WIDENED', async () => {
    for (const scope of ['kb', '*', 'tickets:comment']) {
      const { record } = await appended(link(scope));
      const r = await verifyCapabilities(record, trust());
      expect(
        r.problems.map((p) => p.code),
        scope,
      ).toEqual(['SCOPE_WIDENED']);
      expect(r.ok).toBe(false);
    }
  });

  it('a narrowing block, then a widening one after it: SCOPE_WIDENED', async () => {
    const first = await appendBiscuitBlock(
      tokenOf(envelopes.capability, 'biscuit'),
      root,
      link('kb:read:faq'),
    );
    const second = await appendBiscuitBlock(first, root, link('kb:read'));
    const r = await verifyCapabilities(withToken(envelopes.capability, 'biscuit', second), trust());
    expect(r.problems.map((p) => p.code)).toEqual(['SCOPE_WIDENED']);
  });

  it('on a step record too', async () => {
    const token = await appendBiscuitBlock(tokenOf(envelopes.step, 'biscuit'), root, narrowCheck);
    const r = await verifyCapabilities(withToken(envelopes.step, 'biscuit', token), trust());
    expect(r.problems).toEqual([]);
    expect(r.chains[0]!.tokens).toEqual(['vc+jwt', 'biscuit']);
  });
});

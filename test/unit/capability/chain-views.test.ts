import { beforeAll, describe, expect, it } from 'vitest';
import { verifyCapabilities } from '../../../src/capability/verify.ts';
import type { ApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { capabilityEnvelopes, RUN_ID } from '../../helpers/capabilities.ts';
import { generateDevPki } from '../../helpers/pki.ts';

/**
 * The served `capability_chain[]` views are unsigned: what the UI shows and `service-ctl verify`
 * prints next to the record. Each must say exactly what is signed (the capability predicate, or
 * the step's VC of the same capability); a step whose views no token backs is refused.
 */
type View = {
  capability: string;
  links: { scope: string; granted_by: string; approved_by: string | null }[];
  approved_by: string | null;
  [k: string]: unknown;
};

let signer: KeySigner;
beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
});

const views = (r: ApiEnvelope): View[] => r.capability_chain as View[];
const copy = (r: ApiEnvelope): ApiEnvelope => structuredClone(r);
const codes = async (r: ApiEnvelope): Promise<string[]> =>
  (await verifyCapabilities(r, { publicKeys: [signer.publicKey] })).problems.map((p) => p.code);

describe('capability_chain views against what is signed', () => {
  it('the untampered records verify', async () => {
    const { capability, step } = await capabilityEnvelopes(signer);
    expect(await codes(capability)).toEqual([]);
    expect(await codes(step)).toEqual([]);
  });

  it("a capability record's view with another approver or granter is CHAIN_MISMATCH", async () => {
    const { capability } = await capabilityEnvelopes(signer);
    const forged = copy(capability);
    for (const v of views(forged)) {
      v.links.at(-1)!.approved_by = 'user:mallory';
      v.approved_by = 'user:mallory';
      v.links[0]!.granted_by = 'org:evil';
    }
    expect(await codes(forged)).toEqual(['CHAIN_MISMATCH']);
    // Even a change the links do not carry (only the summary members).
    const summary = copy(capability);
    views(summary)[0]!.approved_by = 'user:mallory';
    expect(await codes(summary)).toEqual(['CHAIN_MISMATCH']);
  });

  it("a capability record's view without tokens is still compared with the predicate", async () => {
    const { capability } = await capabilityEnvelopes(signer);
    const forged = copy(capability);
    delete forged.capability_tokens;
    views(forged)[0]!.approved_by = 'user:mallory';
    expect(await codes(forged)).toEqual(['CHAIN_MISMATCH']);
  });

  it('a step record with an emptied token list is TOKENS_MISSING; without the field (tokens off) nothing vouches for its views', async () => {
    const { step } = await capabilityEnvelopes(signer);
    const emptied = copy(step);
    emptied.capability_tokens = [];
    expect(await codes(emptied)).toEqual(['TOKENS_MISSING']);
    // SERVICE_CAPABILITY_TOKENS=0 serves no capability_tokens field at all: the record verifies,
    // but its views are not vouched for (no CHAIN line): whatever they say is not reported as checked.
    const off = copy(step);
    delete off.capability_tokens;
    for (const v of views(off)) {
      v.links.at(-1)!.approved_by = 'user:mallory';
      v.approved_by = 'user:mallory';
    }
    const report = await verifyCapabilities(off, { publicKeys: [signer.publicKey] });
    expect(report.problems).toEqual([]);
    expect(report.chains).toEqual([]);
    expect(report.lines.join('\n')).not.toContain('mallory');
  });

  it("a step view's summary members must be the VC's too, not only its links", async () => {
    const { step } = await capabilityEnvelopes(signer);
    const forged = copy(step);
    views(forged)[0]!.approved_by = 'user:mallory';
    expect(await codes(forged)).toEqual(['TOKEN_MISMATCH']);
  });

  it('a second step view that no VC backs is CHAIN_MISMATCH', async () => {
    const { step } = await capabilityEnvelopes(signer);
    const forged = copy(step);
    const extra = structuredClone(views(forged)[0]!);
    extra.capability = `capability:${RUN_ID}:retrieve:1`;
    extra.approved_by = 'user:mallory';
    views(forged).push(extra);
    expect(await codes(forged)).toEqual(['CHAIN_MISMATCH']);
  });
});

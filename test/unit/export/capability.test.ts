import { describe, expect, it } from 'vitest';
import { capabilityStatement } from '../../../src/attest/index.ts';
import { verifyCapabilityChain } from '../../../src/export/capability.ts';

/** The capability-chain hook of the export verifier (workflow step d). */
describe('verifyCapabilityChain', () => {
  const statement = capabilityStatement({
    runId: '0190a5c8-1234-7abc-8def-0123456789ab',
    stepId: 'ask',
    index: 0,
    chain: [{ scope: 'model:invoke', grantedBy: 'lead', approvedBy: 'security' }],
  });
  const chain = statement.predicate.chain;
  const trusted = () => true;

  it('accepts the signed chain projected unchanged', () => {
    expect(
      verifyCapabilityChain({ kind: 'capability', capability_chain: chain }, statement, trusted),
    ).toEqual([]);
  });

  it('rejects a projection that differs from what was signed, a link without a grantor, or a missing chain', () => {
    const changed = [{ ...chain[0]!, approvedBy: 'nobody' }];
    expect(
      verifyCapabilityChain({ kind: 'capability', capability_chain: changed }, statement, trusted),
    ).toEqual([expect.objectContaining({ code: 'CAPABILITY_CHAIN_INVALID' })]);
    expect(
      verifyCapabilityChain(
        { kind: 'step', capability_chain: [{ scope: 's', grantedBy: '' }] },
        undefined,
        trusted,
      ).map((p) => p.message),
    ).toEqual(
      expect.arrayContaining([expect.stringContaining('no chain'), expect.stringContaining('link 0')]),
    );
    expect(
      verifyCapabilityChain({ kind: 'capability', capability_chain: null }, statement, trusted),
    ).toHaveLength(1);
  });

  it('never takes a capability token it cannot check as checked', () => {
    expect(
      verifyCapabilityChain(
        { kind: 'step', capability_chain: null, capability_tokens: { vc: ['x'] } },
        undefined,
        trusted,
      ),
    ).toEqual([expect.objectContaining({ code: 'CAPABILITY_TOKEN_INVALID' })]);
  });
});

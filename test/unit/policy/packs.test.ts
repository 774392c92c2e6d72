import { describe, expect, it } from 'vitest';
import type { PolicyPackRef, RunSpec, StepSpec } from '../../../src/crd/run.ts';
import { buildAibom, type Aibom, type PolicyPackOverride } from '../../../src/aibom/index.ts';
import {
  BASELINE_GUARDRAILS,
  parsePolicyPackRef,
  PolicyError,
  UNVERSIONED,
} from '../../../src/policy/index.ts';
import { runWith } from '../aibom/fixtures.ts';

const model = (id: string, policyPack?: PolicyPackRef): StepSpec => ({
  id,
  model: { name: 'gpt-4o', provider: 'openai', version: '2024-08-06' },
  ...(policyPack !== undefined ? { policyPack } : {}),
});
const tool = (id: string, policyPack?: PolicyPackRef): StepSpec => ({
  id,
  tool: { name: 'trivy' },
  ...(policyPack !== undefined ? { policyPack } : {}),
});

function bomOf(spec: RunSpec, policyPackOverride?: PolicyPackOverride): Aibom {
  return buildAibom({
    run: runWith(spec),
    attestationIds: [],
    ranSteps: spec.steps.map((s) => s.id),
    ...(policyPackOverride !== undefined ? { policyPackOverride } : {}),
  });
}

const packOf = (bom: Aibom): string => `${bom.metadata.policy_pack}@${bom.metadata.policy_pack_version}`;

describe('parsePolicyPackRef', () => {
  it('parses PACK and PACK@VERSION', () => {
    expect(parsePolicyPackRef('baseline')).toEqual({ name: 'baseline' });
    expect(parsePolicyPackRef('strict@2.1.0')).toEqual({ name: 'strict', version: '2.1.0' });
    expect(parsePolicyPackRef('org/eu-ai-act@v1+build.7')).toEqual({
      name: 'org/eu-ai-act',
      version: 'v1+build.7',
    });
    expect('version' in parsePolicyPackRef('baseline')).toBe(false);
  });

  it.each([
    ['empty', ''],
    ['only @', '@'],
    ['no pack', '@1.0'],
    ['empty version', 'strict@'],
    ['two @', 'strict@1@2'],
    ['leading space', ' strict'],
    ['inner space', 'strict pack'],
    ['space in version', 'strict@1 2'],
    ['newline', 'strict\n'],
    ['control character', 'strict\u0000'],
    ['name too long', 'a'.repeat(254)],
    ['version too long', `a@${'1'.repeat(129)}`],
  ])('rejects %s with INVALID_POLICY_PACK', (_, text) => {
    let error: unknown;
    try {
      parsePolicyPackRef(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).code).toBe('INVALID_POLICY_PACK');
  });
});

describe('run policy pack resolution: override > the pack found in the step specs > baseline (the spec)', () => {
  const full: RunSpec = {
    policyPack: { name: 'run-pack', version: '3' },
    steps: [
      tool('a'),
      model('b', { name: 'first-step', version: '1' }),
      tool('c', { name: 'second-step', version: '2' }),
    ],
  };

  it('takes the override first', () => {
    expect(packOf(bomOf(full, { name: 'cli', version: '9' }))).toBe('cli@9');
  });

  it('then the pack found in the step specs: the first step spec with one, the run-level pack being the pack of those naming none', () => {
    // `a` names none: it carries the run-level pack, so that is the pack found in the step specs.
    expect(packOf(bomOf(full))).toBe('run-pack@3');
    // The first step names its own: it wins over the run-level pack.
    const ownFirst: RunSpec = {
      ...full,
      steps: [model('b', { name: 'first-step', version: '1' }), tool('a')],
    };
    expect(packOf(bomOf(ownFirst))).toBe('first-step@1');
    expect(bomOf(ownFirst).components.policies.map((p) => `${p.pack}@${p.version}`)).toEqual([
      'first-step@1',
      'run-pack@3',
    ]);
    // Without a run-level pack: the first step spec that names one.
    const { policyPack: _, ...noRun } = full;
    expect(packOf(bomOf(noRun))).toBe('first-step@1');
  });

  it('then the run-level pack (a run without steps), which the steps without a pack of their own follow', () => {
    expect(packOf(bomOf({ policyPack: { name: 'run-pack', version: '3' }, steps: [] }))).toBe('run-pack@3');
    const bom = bomOf({ policyPack: { name: 'run-pack', version: '3' }, steps: [tool('a'), model('b')] });
    expect(bom.components.models[0]!.properties.policy_pack).toBe('run-pack');
  });

  it("gives a step pack without a version the run-level pack's version of the same name", () => {
    const spec: RunSpec = {
      policyPack: { name: 'strict', version: '4' },
      steps: [model('a', { name: 'strict' })],
    };
    expect(packOf(bomOf(spec))).toBe('strict@4');
  });

  it('then baseline, unversioned, with the built-in guardrail catalog', () => {
    const bom = bomOf({ steps: [tool('a'), model('b')] });
    expect(packOf(bom)).toBe(`baseline@${UNVERSIONED}`);
    expect(bom.components.policies).toEqual([
      { pack: 'baseline', version: UNVERSIONED, guardrails: [...BASELINE_GUARDRAILS] },
    ]);
    expect(bomOf({ steps: [] }).components.policies).toHaveLength(1);
  });

  it('records a missing or empty version as unversioned', () => {
    expect(packOf(bomOf({ policyPack: { name: 'p' }, steps: [] }))).toBe(`p@${UNVERSIONED}`);
    expect(packOf(bomOf({ policyPack: { name: 'p', version: '' }, steps: [] }))).toBe(`p@${UNVERSIONED}`);
    expect(packOf(bomOf(full, { name: 'cli' }))).toBe(`cli@${UNVERSIONED}`);
  });

  it('gives an override without a version the version the spec records for that pack', () => {
    expect(packOf(bomOf(full, { name: 'run-pack' }))).toBe('run-pack@3');
    expect(packOf(bomOf(full, { name: 'second-step' }))).toBe('second-step@2');
    expect(packOf(bomOf(full, { name: 'second-step', version: '7' }))).toBe('second-step@7');
  });

  it('rejects pack names and versions that cannot print as PACK@VERSION', () => {
    for (const bad of [{ name: 'a@b' }, { name: 'a b' }, { name: 'a', version: 'x y' }, { name: '' }]) {
      expect(() => bomOf({ policyPack: bad, steps: [] }), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_POLICY_PACK' }),
      );
      expect(() => bomOf({ steps: [tool('a', bad)] }), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'INVALID_POLICY_PACK' }),
      );
    }
    expect(() => bomOf({ steps: [] }, { name: 'a@b' })).toThrow(
      expect.objectContaining({ code: 'INVALID_POLICY_PACK' }),
    );
  });
});

describe('step packs and components.policies', () => {
  it("records a model step's own pack name, else the run-level pack, else the run's", () => {
    const bom = bomOf({
      policyPack: { name: 'run-pack', version: '1' },
      steps: [model('a'), model('b', { name: 'strict', version: '2' })],
    });
    expect(bom.components.models.map((m) => m.properties.policy_pack)).toEqual(['run-pack', 'strict']);
    expect(packOf(bom)).toBe('run-pack@1');
    // A first step with its own pack makes it the run's; the others still follow the run-level one.
    const own = bomOf({
      policyPack: { name: 'run-pack', version: '1' },
      steps: [model('b', { name: 'strict', version: '2' }), model('a')],
    });
    expect(packOf(own)).toBe('strict@2');
    expect(own.components.models.map((m) => m.properties.policy_pack)).toEqual(['strict', 'run-pack']);
    // Without a run-level pack, a step without one follows the run's pack.
    const noRun = bomOf({ steps: [model('a'), model('b', { name: 'strict', version: '2' })] });
    expect(noRun.components.models.map((m) => m.properties.policy_pack)).toEqual(['strict', 'strict']);
  });

  it('lists the run pack first, then the run-level pack, then step packs in order of first use, once each', () => {
    const bom = bomOf({
      policyPack: { name: 'run-pack', version: '1' },
      steps: [
        tool('a', { name: 'z-pack', version: '1' }),
        model('b', { name: 'a-pack', version: '1' }),
        tool('c', { name: 'z-pack', version: '1' }),
        tool('d', { name: 'z-pack', version: '2' }),
        model('e'),
      ],
    });
    expect(bom.components.policies.map((p) => `${p.pack}@${p.version}`)).toEqual([
      'z-pack@1',
      'run-pack@1',
      'a-pack@1',
      'z-pack@2',
    ]);
  });

  it('merges guardrails of every reference to the same pack@version, sorted and deduplicated', () => {
    const bom = bomOf({
      policyPack: { name: 'strict', version: '2', guardrails: ['pii-redaction', 'egress-deny'] },
      steps: [
        tool('a', { name: 'strict', version: '2', guardrails: ['toxicity', 'pii-redaction'] }),
        tool('b', { name: 'strict', guardrails: ['audit'] }),
        tool('c', { name: 'strict', version: '3', guardrails: ['only-v3'] }),
        tool('d', { name: 'other' }),
      ],
    });
    expect(bom.components.policies).toEqual([
      // `b` says `strict` without a version in a run pinned to strict@2: it means strict@2.
      { pack: 'strict', version: '2', guardrails: ['audit', 'egress-deny', 'pii-redaction', 'toxicity'] },
      { pack: 'strict', version: '3', guardrails: ['only-v3'] },
      { pack: 'other', version: UNVERSIONED, guardrails: [] },
    ]);
  });

  it('uses the declared baseline guardrails over the catalog', () => {
    const bom = bomOf({ policyPack: { name: 'baseline', version: '1', guardrails: ['custom'] }, steps: [] });
    expect(bom.components.policies).toEqual([{ pack: 'baseline', version: '1', guardrails: ['custom'] }]);
  });

  it('drops a run-level pack replaced by the override, but keeps step packs', () => {
    const bom = bomOf(
      {
        policyPack: { name: 'run-pack', version: '1', guardrails: ['g1'] },
        steps: [model('a'), tool('b', { name: 'step-pack', version: '1' })],
      },
      { name: 'cli', version: '1' },
    );
    expect(bom.components.policies.map((p) => `${p.pack}@${p.version}`)).toEqual(['cli@1', 'step-pack@1']);
    expect(bom.components.models[0]!.properties.policy_pack).toBe('cli');
  });

  it('credits the guardrails the spec declares for the overriding pack', () => {
    const bom = bomOf(
      { policyPack: { name: 'strict', version: '2', guardrails: ['g1'] }, steps: [] },
      { name: 'strict' },
    );
    expect(bom.components.policies).toEqual([{ pack: 'strict', version: '2', guardrails: ['g1'] }]);
  });
});

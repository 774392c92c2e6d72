import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/attest/index.ts';
import { aibomDigest, buildAibom, prettyAibom, serializeAibom, summarize } from '../../../src/aibom/index.ts';
import { BASELINE_GUARDRAILS } from '../../../src/policy/index.ts';
import { fixtureInput, runWith } from './fixtures.ts';

describe('serializeAibom / aibomDigest', () => {
  it('is the UTF-8 of the JCS canonical JSON, without a trailing newline', () => {
    const bom = buildAibom(fixtureInput());
    const bytes = serializeAibom(bom);
    expect(bytes.toString('utf8')).toBe(canonicalJson(bom));
    expect(bytes.at(-1)).toBe('}'.charCodeAt(0));
    expect(bytes.toString('utf8').startsWith('{"bom_format":"CycloneDX","components":{"models":[')).toBe(
      true,
    );
  });

  it('digests the stored bytes as sha256:<hex>', () => {
    const bytes = serializeAibom(buildAibom(fixtureInput()));
    expect(aibomDigest(bytes)).toBe(`sha256:${createHash('sha256').update(bytes).digest('hex')}`);
    expect(aibomDigest(bytes)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('prettyAibom', () => {
  it('is indented JSON whose canonical form is the stored bytes', () => {
    const bom = buildAibom(fixtureInput());
    const text = prettyAibom(bom);
    expect(text.endsWith('}\n')).toBe(true);
    expect(text.split('\n')[1]).toBe('  "bom_format": "CycloneDX",');
    expect(Buffer.from(canonicalJson(JSON.parse(text)), 'utf8')).toEqual(serializeAibom(bom));
  });

  it('round-trips numbers and non-ASCII strings exactly', () => {
    const input = fixtureInput();
    input.run.spec.steps[1]!.model!.temperature = 0.1 + 0.2;
    input.run.spec.steps[1]!.model!.name = 'modèle-é-😀';
    const bom = buildAibom(input);
    expect(Buffer.from(canonicalJson(JSON.parse(prettyAibom(bom))), 'utf8')).toEqual(serializeAibom(bom));
  });
});

describe('summarize', () => {
  it('tallies models, tools, guardrails and the run pack, with exactly those keys', () => {
    const summary = summarize(buildAibom(fixtureInput()));
    expect(summary).toEqual({ models: 2, tools: 2, guardrails: 4, policy_pack: 'baseline' });
    expect(Object.keys(summary).sort()).toEqual(['guardrails', 'models', 'policy_pack', 'tools']);
  });

  it('counts the built-in baseline catalog when it applies', () => {
    const bom = buildAibom({
      run: runWith({ steps: [{ id: 'a', tool: { name: 't' } }] }),
      attestationIds: [],
      ranSteps: ['a'],
    });
    expect(summarize(bom)).toEqual({
      models: 0,
      tools: 1,
      guardrails: BASELINE_GUARDRAILS.length,
      policy_pack: 'baseline',
    });
  });
});

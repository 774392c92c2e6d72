import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ModelSpec, PolicyPackRef, RunSpec, StepSpec, ToolSpec } from '../../../src/crd/run.ts';
import { canonicalJson } from '../../../src/attest/index.ts';
import {
  buildAibom,
  prettyAibom,
  serializeAibom,
  summarize,
  toCycloneDx,
  validateCycloneDx,
  type AibomInput,
  type PolicyPackOverride,
} from '../../../src/aibom/index.ts';
import { leafPaths, reverseKeys } from './fixtures.ts';
import { ALWAYS_PRESENT, SPEC_PATHS } from './spec-paths.ts';

// Optional members are generated absent (never `undefined`), as exactOptionalPropertyTypes and a
// Run CR read from the API server have them: fc.record with `requiredKeys`.
const inputs = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });

// What the Run CRD admits: step ids of its pattern, text of 1-253 characters, temperatures 0-10.
const stepId = fc.stringMatching(/^[a-z0-9]([-a-z0-9_.]{0,8}[a-z0-9])?$/);
const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 });
const packName = fc.constantFrom('baseline', 'strict', 'eu-ai-act', 'org/custom');
const packRef: fc.Arbitrary<PolicyPackRef> = fc.record(
  {
    name: packName,
    version: fc.constantFrom('', '1', '2.0.0', 'v3+build.1'),
    guardrails: fc.array(fc.constantFrom('pii-redaction', 'toxicity', 'egress-deny', 'audit'), {
      maxLength: 4,
    }),
  },
  { requiredKeys: ['name'] },
);

const model: fc.Arbitrary<ModelSpec> = fc.record(
  { name: text, provider: text, version: text, temperature: fc.double({ min: 0, max: 10, noNaN: true }) },
  { requiredKeys: ['name', 'provider', 'version'] },
);
const tool: fc.Arbitrary<ToolSpec> = fc.record(
  { name: text, command: fc.array(fc.string({ maxLength: 16 }), { maxLength: 5 }) },
  { requiredKeys: ['name'] },
);

function stepOf(id: string, ids: string[]): fc.Arbitrary<StepSpec> {
  const common = {
    // Mostly real step ids, sometimes one no step has (the CRD does not check).
    dependsOn: fc.subarray([...ids, 'ghost']),
    inputs,
    policyPack: packRef,
  };
  return fc.oneof(
    fc.record({ id: fc.constant(id), model, ...common }, { requiredKeys: ['id', 'model'] }),
    fc.record({ id: fc.constant(id), tool, ...common }, { requiredKeys: ['id', 'tool'] }),
  );
}

const spec: fc.Arbitrary<RunSpec> = fc
  .uniqueArray(stepId, { maxLength: 8 })
  .chain((ids) =>
    fc.record(
      { policyPack: packRef, inputs, steps: fc.tuple(...ids.map((id) => stepOf(id, ids))) },
      { requiredKeys: ['steps'] },
    ),
  );

const override: fc.Arbitrary<PolicyPackOverride> = fc.record(
  { name: packName, version: fc.constantFrom('1', '9.9') },
  { requiredKeys: ['name'] },
);

/** Any subset of the steps ran (a Failed run may stop before some), in any order of records. */
const aibomInput: fc.Arbitrary<AibomInput> = fc
  .record(
    {
      run: fc.record({
        id: fc.uuid({ version: 4 }),
        namespace: fc.constant('ns'),
        name: fc.constant('run'),
        spec,
        phase: fc.constantFrom('Succeeded' as const, 'Failed' as const),
      }),
      attestationIds: fc.uniqueArray(fc.uuid({ version: 7 }), { maxLength: 6 }),
      policyPackOverride: override,
    },
    { requiredKeys: ['run', 'attestationIds'] },
  )
  .chain((input) =>
    fc
      .shuffledSubarray(input.run.spec.steps.map((s) => s.id))
      .map((ranSteps): AibomInput => ({ ...input, ranSteps })),
  );

describe('AIBOM properties over random Run specs', () => {
  it('always serializes, with only spec-table paths and one component per step that ran, of the right type', () => {
    fc.assert(
      fc.property(aibomInput, (input) => {
        const bom = buildAibom(input);
        const bytes = serializeAibom(bom);
        expect(Buffer.from(canonicalJson(JSON.parse(prettyAibom(bom))), 'utf8')).toEqual(bytes);

        const paths = leafPaths(JSON.parse(bytes.toString('utf8')));
        for (const [p, types] of paths) {
          if (types.has('empty-array')) {
            // An empty array is a spec-table array with no elements.
            expect(
              Object.keys(SPEC_PATHS).some((s) => s.startsWith(p)),
              p,
            ).toBe(true);
          } else {
            expect([...types], p).toEqual([SPEC_PATHS[p]]);
          }
        }
        for (const p of ALWAYS_PRESENT) expect(paths.has(p), p).toBe(true);

        // Spec order, whatever order the records came in; a step that never ran is nowhere.
        const ran = new Set(input.ranSteps);
        const steps = input.run.spec.steps.filter((s) => ran.has(s.id));
        expect(bom.components.models.map((m) => m.id)).toEqual(steps.filter((s) => s.model).map((s) => s.id));
        expect(bom.components.tools.map((t) => t.id)).toEqual(steps.filter((s) => s.tool).map((s) => s.id));
        expect(bom.trust.subjects).toEqual([
          `run:${bom.metadata.run_id}`,
          ...steps.map((s) => `step:${bom.metadata.run_id}:${s.id}`),
        ]);
        expect(summarize(bom)).toMatchObject({
          models: bom.components.models.length,
          tools: bom.components.tools.length,
        });
      }),
      { numRuns: 300 },
    );
  });

  it('does not depend on the order of object keys in the input', () => {
    fc.assert(
      fc.property(aibomInput, (input) => {
        expect(serializeAibom(buildAibom(reverseKeys(input)))).toEqual(serializeAibom(buildAibom(input)));
      }),
      { numRuns: 200 },
    );
  });

  it('always has a CycloneDX view that passes the strict 1.5 schema and the referential checks', async () => {
    await fc.assert(
      fc.asyncProperty(aibomInput, async (input) => {
        const view = toCycloneDx(buildAibom(input), { run: input.run });
        expect(await validateCycloneDx(view)).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});

/**
 * Fuzzed Runs (the admission property test's generator, legal specs only: what the API server
 * admits) → the recorder's own records → both views. Every view must pass the official CycloneDX 1.7
 * schema (strict, @cyclonedx/cyclonedx-library) and our declaration and SPDX profile checks; the
 * independent validators (PyPI cyclonedx-python-lib, the SPDX project's tools-java) check the same
 * generator's views in test/conformance/views.test.ts.
 */
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  buildViews,
  spdxProfileProblems,
  validateCycloneDx17,
  type CycloneDx17Bom,
} from '../../../src/aibom/views/index.ts';
import { runSpecs } from '../../integration/admission/arbitraries.ts';
import { madeRun, terminalRun } from '../../helpers/views.ts';
import { p256Signer } from '../attest/keys.ts';

const strict17 = new Validation.JsonStrictValidator(Spec.Version.v1dot7);
const signer = p256Signer();

describe('views of fuzzed admissible Runs', () => {
  it('pass the CycloneDX 1.7 schema and the declaration and SPDX profile checks', async () => {
    let runs = 0;
    let steps = 0;
    let datasets = 0;
    await fc.assert(
      fc.asyncProperty(
        runSpecs.filter((g) => g.ok),
        fc.constantFrom('Succeeded' as const, 'Failed' as const),
        async ({ v: spec }, phase) => {
          if (phase === 'Failed' && spec.steps.length === 0) return;
          const m = madeRun(terminalRun(spec, { phase }), signer);
          const [cdx, spdx] = buildViews(m.input);
          const records = new Map(m.records.map((r) => [r.id, r.digest]));
          expect(await strict17.validate(cdx!.bytes.toString('utf8'))).toBeNull();
          expect(await validateCycloneDx17(cdx!.document as CycloneDx17Bom, records)).toEqual([]);
          expect(spdxProfileProblems(spdx!.document)).toEqual([]);
          runs += 1;
          steps += spec.steps.length;
          datasets += spec.steps.reduce((n, s) => n + (s.datasets?.length ?? 0), 0);
        },
      ),
      { numRuns: 60 },
    );
    console.log(`views of ${runs} fuzzed runs (${steps} steps, ${datasets} datasets) validated`);
    expect(runs).toBeGreaterThan(30);
  });
});

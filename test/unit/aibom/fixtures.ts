import { readFileSync } from 'node:fs';
import type { Run, RunSpec } from '../../../src/crd/run.ts';
import { aibomRunOf, type AibomInput, type AibomRun } from '../../../src/aibom/index.ts';

/**
 * test/fixtures/aibom/run.json: a Run CR with two model steps (one with a step-level pack and no
 * temperature), two tool steps (one without a command), capabilities, run inputs and a DAG with a
 * repeated dependency; plus the ids of the attestations made during it.
 */
const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/aibom/run.json', import.meta.url), 'utf8'),
) as {
  run: Run;
  attestationIds: string[];
};

export const RUN_ID = fixture.run.metadata.uid;

/** A fresh deep copy every call: tests may mutate what they get. */
export function fixtureRun(): Run {
  return structuredClone(fixture.run);
}

export function fixtureInput(): AibomInput {
  const run = aibomRunOf(fixtureRun());
  return { run, attestationIds: [...fixture.attestationIds], ranSteps: run.spec.steps.map((s) => s.id) };
}

/** The builder's input for a run every step of which ran (no attestation ids). */
export function everyStepRan(run: AibomRun): AibomInput {
  return { run, attestationIds: [], ranSteps: run.spec.steps.map((s) => s.id) };
}

/** An AibomRun around a spec, for small targeted cases. */
export function runWith(spec: RunSpec, phase: AibomRun['phase'] = 'Succeeded'): AibomRun {
  return { id: RUN_ID, namespace: 'team-a', name: 'r', spec, phase };
}

/** Same JSON value, every object's keys in reverse insertion order (arrays keep their order). */
export function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v: unknown) => reverseKeys(v)) as T;
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, reverseKeys(v)]),
    ) as T;
  }
  return value;
}

/**
 * Leaf paths of a JSON value in the spec table's notation: `a.b`, arrays as `[]`
 * (`components.models[].digests[].alg`). An empty array yields its own path with `[]` appended
 * and nothing below, so absent elements are visible to the caller.
 */
export function leafPaths(value: unknown, path = ''): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (p: string, type: string): void => {
    out.set(p, (out.get(p) ?? new Set()).add(type));
  };
  const walk = (v: unknown, p: string): void => {
    if (Array.isArray(v)) {
      if (v.length === 0) add(`${p}[]`, 'empty-array');
      for (const e of v) walk(e, `${p}[]`);
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, e] of Object.entries(v)) walk(e, p === '' ? k : `${p}.${k}`);
    } else {
      add(p, v === null ? 'null' : typeof v);
    }
  };
  walk(value, path);
  return out;
}

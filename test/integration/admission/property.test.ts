/**
 * Admission half of "whatever the API server admits is attestable and gets an AIBOM", as a property:
 * fast-check generates Run specs (random step counts, model/tool mixes, optional fields present or
 * absent, odd but legal strings, DAG shapes, and, in half of them, illegal choices: control
 * characters, bad pack names, unknown/self/forward dependencies, duplicate ids, NUL in inputs, counts
 * over the bounds) and submits each to the real kube-apiserver with dryRun=All. Then:
 * - an ADMITTED spec (as the server returns it) goes through what the recorder does with it, with the
 *   real code: the step, capability, policy and run statements of src/recorder/extract.ts (sealed by src/recorder/seal.ts)
 *   (each validated against its predicate schema before it is signed), the AIBOM of src/aibom and its
 *   strict CycloneDX 1.5 view, and PostgreSQL jsonb for the runs mirror;
 * - a REFUSED spec got a 422 whose message names a field (spec.… / status.…);
 * - a spec built from legal choices only is admitted (no over-refusal).
 * Driving admitted Runs through the controller end to end is another test's job.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import pg from 'pg';
import { uuidv7 } from 'uuidv7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  aibomDigest,
  aibomRunOf,
  assertValidCycloneDx,
  buildAibom,
  serializeAibom,
  toCycloneDx,
} from '../../../src/aibom/index.ts';
import type { Run, RunSpec, StepStatus } from '../../../src/api/run.ts';
import { aibomStatement } from '../../../src/attest/index.ts';
import { isFinished } from '../../../src/api/run.ts';
import { stepBatch, terminalBatch, type Batch } from '../../../src/recorder/extract.ts';
import { sealRecord } from '../../../src/recorder/seal.ts';
import { p256Signer } from '../../unit/attest/keys.ts';
import { stack } from '../../helpers/stack.ts';
import { runSpecs, type G } from './arbitraries.ts';
import { admit, freshNamespace, outcome } from './helpers.ts';

// ---------------------------------------------------------------------------------------------

let ns: string;
let db: pg.Client;
const signer = p256Signer();

beforeAll(async () => {
  ns = await freshNamespace('adm-prop');
  db = new pg.Client({ connectionString: stack().env.DATABASE_URL });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
});

/** Seals every statement of a batch as the recorder does (sealing validates the predicate schema). */
function sealAll(batch: Batch): number {
  for (const item of batch.items) sealRecord(item.statement, signer, item.meta);
  return batch.items.length;
}

/**
 * What the controller does with an admitted Run once every step finished (the last one Failed when
 * `fail`): every record built and validated against its predicate schema, signed; the AIBOM built,
 * serialised, wrapped in its statement and viewed as strict CycloneDX 1.5; spec and status storable
 * in PostgreSQL jsonb. Throws on the first thing that does not hold.
 */
async function recorderAccepts(admitted: Run, fail: boolean): Promise<number> {
  const run = structuredClone(admitted);
  const steps: StepStatus[] = run.spec.steps.map((s, i) => {
    const last = i === run.spec.steps.length - 1;
    return fail && last
      ? {
          id: s.id,
          phase: 'Failed',
          startedAt: '2025-06-01T10:00:00Z',
          finishedAt: '2025-06-01T10:00:01Z',
          error: 'e',
        }
      : {
          id: s.id,
          phase: 'Succeeded',
          startedAt: '2025-06-01T10:00:00Z',
          finishedAt: '2025-06-01T10:00:01Z',
          output: { i },
        };
  });
  run.status = { phase: fail ? 'Failed' : 'Succeeded', steps };
  let records = 0;
  for (const step of run.spec.steps) {
    const st = steps.find((s) => s.id === step.id);
    if (isFinished(st)) records += sealAll(stepBatch(run, step, st));
  }
  records += sealAll(terminalBatch(run, new Date()));
  const aibomRun = aibomRunOf(run);
  const bom = buildAibom({ run: aibomRun, attestationIds: Array.from({ length: records }, () => uuidv7()) });
  const bytes = serializeAibom(bom);
  aibomStatement({ runId: aibomRun.id, bom, sha256: aibomDigest(bytes).slice('sha256:'.length) });
  await assertValidCycloneDx(toCycloneDx(bom, { run: aibomRun }));
  await db.query('SELECT $1::jsonb, $2::jsonb', [JSON.stringify(run.spec), JSON.stringify(run.status)]);
  return records + 1; // and the AIBOM's own attestation
}

/** A field path in the message: spec.steps[3].tool.name, spec.inputs, spec.steps[id=a].inputs … */
const NAMES_A_FIELD = /\b(spec|status)(\.[A-Za-z]+(\[[^\]]*\])*)+|\bspec\.steps\b/;

/** One generated spec through admission, then through the recorder or the refusal checks. */
async function check(g: G<RunSpec>, fail: boolean, seen: Tally): Promise<void> {
  try {
    await checkOne(g, fail, seen);
  } catch (err) {
    // A batch is a poor counterexample: name the one spec that broke the property.
    const spec = JSON.stringify(g.v);
    throw new Error(
      `${(err as Error).message}\n(legal: ${g.ok}, fail last step: ${fail}) spec: ${spec.length > 6000 ? `${spec.slice(0, 6000)}…` : spec}`,
      { cause: err },
    );
  }
}

async function checkOne(g: G<RunSpec>, fail: boolean, seen: Tally): Promise<void> {
  const result = await outcome(admit(ns, g.v, `p-${randomUUID().slice(0, 8)}`));
  if ('ok' in result) {
    seen.admitted++;
    const records = await recorderAccepts(result.ok, fail);
    seen.maxRecords = Math.max(seen.maxRecords, records);
    // docs/runs.md: at most 2 x steps + capabilities + 3 records, so at most 515.
    const caps = result.ok.spec.steps.reduce((n, s) => n + (s.capabilities?.length ?? 0), 0);
    expect(records).toBeLessThanOrEqual(2 * result.ok.spec.steps.length + caps + 3);
    expect(records).toBeLessThanOrEqual(515);
  } else {
    seen.refused++;
    expect(g.ok, `legal spec refused: ${result.refused.message}`).toBe(false);
    expect(result.refused.code).toBe(422);
    expect(result.refused.message).toMatch(NAMES_A_FIELD);
  }
}

interface Tally {
  admitted: number;
  refused: number;
  maxRecords: number;
}

/** 300 specs in batches of 10 submitted at once (the API server answers them in parallel). */
const BATCH = 10;
const RUNS = 30;

describe('generated Run specs', () => {
  it(
    'admitted ⇒ attestable with an AIBOM; refused ⇒ 422 naming a field; legal ⇒ admitted',
    // Typically 20-50 s for 300 specs on a busy 2-core machine: a generous bound, far from it.
    { timeout: 600_000 },
    async () => {
      const seen: Tally = { admitted: 0, refused: 0, maxRecords: 0 };
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(runSpecs, fc.boolean()), { minLength: BATCH, maxLength: BATCH }),
          async (batch) => {
            await Promise.all(batch.map(([g, fail]) => check(g, fail, seen)));
          },
        ),
        { numRuns: RUNS, endOnFailure: true },
      );
      // Both halves of the property were exercised.
      expect(seen.admitted).toBeGreaterThan(60);
      expect(seen.refused).toBeGreaterThan(60);
      console.log(
        `admission property: ${seen.admitted} admitted, ${seen.refused} refused, max ${seen.maxRecords} records`,
      );
    },
  );
});

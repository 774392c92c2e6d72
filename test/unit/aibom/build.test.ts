import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunSpec } from '../../../src/crd/run.ts';
import { aibomStatement, canonicalJson, stepStatement } from '../../../src/attest/index.ts';
import {
  AibomError,
  aibomDigest,
  aibomRunOf,
  aibomSerialNumber,
  buildAibom,
  dagDigest,
  dagOf,
  DEFAULT_TEMPERATURE,
  inputDigest,
  nameBasedUuidV8,
  serializeAibom,
  summarize,
  type AibomInput,
} from '../../../src/aibom/index.ts';
import {
  everyStepRan,
  fixtureInput,
  fixtureRun,
  leafPaths,
  reverseKeys,
  RUN_ID,
  runWith,
} from './fixtures.ts';
import { expectGoldenJson, expectGoldenText } from './golden.ts';
import { SPEC_PATHS } from './spec-paths.ts';

const sha = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    if (e instanceof AibomError) return e.code;
    throw e;
  }
  return undefined;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

describe('buildAibom: golden', () => {
  it('matches test/fixtures/aibom/payload.json and its digest', async () => {
    const bom = buildAibom(fixtureInput());
    await expectGoldenJson('payload.json', bom);
    await expectGoldenText('payload.sha256', aibomDigest(serializeAibom(bom)));
  });
});

describe('buildAibom: exactly the spec table', () => {
  it('has exactly the paths of the spec table, with their types', () => {
    const paths = leafPaths(buildAibom(fixtureInput()));
    // The fixture fills every array, so every path of the table appears (the empty `command` of
    // one tool shows as an extra `[]` marker next to the other tool's strings).
    const found = new Map([...paths].filter(([p]) => !p.endsWith('[]') || paths.get(p)?.has('string')));
    expect([...found.keys()].sort()).toEqual(Object.keys(SPEC_PATHS).sort());
    for (const [p, types] of found) {
      expect(
        [...types].filter((t) => t !== 'empty-array'),
        p,
      ).toEqual([SPEC_PATHS[p]]);
    }
  });

  it('never copies extra keys of the caller objects', () => {
    const input = fixtureInput();
    const step = input.run.spec.steps[1]!;
    Object.assign(step.model!, { secret: 'x' });
    Object.assign(input.run.spec.policyPack!, { retentionDays: 30 });
    expect(serializeAibom(buildAibom(input))).toEqual(serializeAibom(buildAibom(fixtureInput())));
  });

  it('sets the constants and the terminal status', () => {
    const bom = buildAibom(fixtureInput());
    expect(bom.bom_format).toBe('CycloneDX');
    expect(bom.spec_version).toBe('1.5');
    expect(bom.metadata.status).toBe('succeeded');
    const failed = fixtureInput();
    failed.run.phase = 'Failed';
    expect(buildAibom(failed).metadata.status).toBe('failed');
    expect(bom.components.models.every((m) => m.type === 'model')).toBe(true);
    expect(bom.components.tools.every((t) => t.type === 'tool')).toBe(true);
  });
});

describe('buildAibom: only the steps that ran (issue 28)', () => {
  it('names only steps with a record: components and trust subjects, in spec order; the DAG stays whole', () => {
    const all = buildAibom(fixtureInput());
    const stopped = fixtureInput();
    stopped.run.phase = 'Failed';
    // Records arrive in any order; an id naming no step is ignored.
    stopped.ranSteps = ['summarize', 'extract', 'no-such-step'];
    const bom = buildAibom(stopped);
    expect(bom.metadata.status).toBe('failed');
    expect(bom.components.tools.map((t) => t.id)).toEqual(['extract']);
    expect(bom.components.models.map((m) => m.id)).toEqual(['summarize']);
    expect(bom.trust.subjects).toEqual([
      `run:${RUN_ID}`,
      `step:${RUN_ID}:extract`,
      `step:${RUN_ID}:summarize`,
    ]);
    // What was asked for is still what the digests cover; the policies are the run's declared ones.
    expect(bom.metadata.dag_digest).toBe(all.metadata.dag_digest);
    expect(bom.metadata.input_digest).toBe(all.metadata.input_digest);
    expect(bom.components.policies).toEqual(all.components.policies);
    expect(summarize(bom)).toMatchObject({ models: 1, tools: 1 });
  });

  it('lists no step of a run in which none ran', () => {
    const none = { ...fixtureInput(), ranSteps: [] };
    none.run.phase = 'Failed';
    const bom = buildAibom(none);
    expect(bom.components.models).toEqual([]);
    expect(bom.components.tools).toEqual([]);
    expect(bom.trust.subjects).toEqual([`run:${RUN_ID}`]);
  });

  it('still rejects a malformed step that did not run (the spec is checked whole)', () => {
    const dup = fixtureRun().spec;
    dup.steps[3]!.id = 'extract';
    expect(codeOf(() => buildAibom({ run: runWith(dup), attestationIds: [], ranSteps: [] }))).toBe(
      'INVALID_STEP',
    );
  });
});

describe('buildAibom: derivations', () => {
  it('derives serial_number as a name-based UUIDv8 of aibom:<run_id>', () => {
    const bom = buildAibom(fixtureInput());
    const h = Buffer.from(sha(`aibom:${RUN_ID}`).slice(0, 32), 'hex');
    h[6] = (h[6]! & 0x0f) | 0x80;
    h[8] = (h[8]! & 0x3f) | 0x80;
    const hex = h.toString('hex');
    const uuid = [
      hex.slice(0, 8),
      hex.slice(8, 12),
      hex.slice(12, 16),
      hex.slice(16, 20),
      hex.slice(20),
    ].join('-');
    expect(bom.serial_number).toBe(`urn:uuid:${uuid}`);
    expect(bom.serial_number).toBe(aibomSerialNumber(RUN_ID));
    expect(bom.serial_number).toMatch(
      /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(nameBasedUuidV8('aibom:other')).not.toBe(uuid);
  });

  it('records run and attestation ids in lower case, so an upper-case id gives the same bytes', () => {
    const upper = fixtureInput();
    upper.run.id = RUN_ID.toUpperCase();
    upper.attestationIds = upper.attestationIds.map((id) => id.toUpperCase());
    expect(serializeAibom(buildAibom(upper))).toEqual(serializeAibom(buildAibom(fixtureInput())));
  });

  it('hashes the DAG sorted by step id with sorted, deduplicated dependsOn', () => {
    const spec = fixtureRun().spec;
    const dag = [
      { id: 'classify', dependsOn: ['extract'] },
      { id: 'extract', dependsOn: [] },
      { id: 'scan', dependsOn: ['classify', 'summarize'] },
      { id: 'summarize', dependsOn: ['extract'] },
    ];
    expect(dagOf(spec)).toEqual(dag);
    expect(dagDigest(spec)).toBe(`sha256:${sha(canonicalJson(dag))}`);
    expect(buildAibom(fixtureInput()).metadata.dag_digest).toBe(dagDigest(spec));
    // Same graph listed in another order: same digest (the components keep spec order).
    const reordered = { ...spec, steps: [...spec.steps].reverse() };
    expect(dagDigest(reordered)).toBe(dagDigest(spec));
    // A different graph: a different digest.
    const rewired = structuredClone(spec);
    rewired.steps[3]!.dependsOn = ['summarize'];
    expect(dagDigest(rewired)).not.toBe(dagDigest(spec));
  });

  it('hashes the run inputs, {} when absent', () => {
    const spec = fixtureRun().spec;
    expect(inputDigest(spec)).toBe(`sha256:${sha(canonicalJson(spec.inputs))}`);
    const { inputs: _, ...noInputs } = spec;
    expect(inputDigest(noInputs)).toBe(`sha256:${sha('{}')}`);
  });

  it('gives each step the digest of its inputs, equal to the step attestation inputDigest', () => {
    const input = fixtureInput();
    const bom = buildAibom(input);
    const summarize = input.run.spec.steps[1]!;
    const statement = stepStatement({
      runId: RUN_ID,
      stepId: summarize.id,
      kind: 'model',
      model: { ...summarize.model!, temperature: summarize.model!.temperature! },
      inputs: summarize.inputs ?? {},
      output: null,
      phase: 'succeeded',
      startedAt: '2025-01-15T10:00:00Z',
      finishedAt: '2025-01-15T10:01:00Z',
      policyPack: { name: 'baseline', version: '1.4.0' },
    });
    expect(bom.components.models[0]!.digests).toEqual([
      { alg: 'SHA-256', content: statement.predicate.inputDigest.sha256 },
    ]);
    // The `scan` tool has no inputs: digest of `{}`.
    expect(bom.components.tools[1]!.digests).toEqual([{ alg: 'SHA-256', content: sha('{}') }]);
  });

  it('records models and tools in spec order, with defaults for temperature and command', () => {
    const bom = buildAibom(fixtureInput());
    expect(bom.components.models.map((m) => [m.id, m.properties.step_id, m.properties.temperature])).toEqual([
      ['summarize', 'summarize', 0.2],
      ['classify', 'classify', DEFAULT_TEMPERATURE],
    ]);
    expect(bom.components.tools.map((t) => [t.id, t.properties.command])).toEqual([
      ['extract', ['pdftotext', '-layout', 'report.pdf', '-']],
      ['scan', []],
    ]);
    expect(bom.components.models[1]).toMatchObject({
      name: 'claude-3-5-sonnet',
      provider: 'anthropic',
      version: '20241022',
    });
  });

  it('lists trust subjects run first then steps in spec order, attestation ids as given', () => {
    const input = fixtureInput();
    const bom = buildAibom(input);
    expect(bom.trust.subjects).toEqual([
      `run:${RUN_ID}`,
      `step:${RUN_ID}:extract`,
      `step:${RUN_ID}:summarize`,
      `step:${RUN_ID}:classify`,
      `step:${RUN_ID}:scan`,
    ]);
    expect(bom.trust.attestation_ids).toEqual(input.attestationIds);
    const reversed = { ...input, attestationIds: [...input.attestationIds].reverse() };
    expect(buildAibom(reversed).trust.attestation_ids).toEqual([...input.attestationIds].reverse());
  });

  it('is a predicate the AIBOM attestation builder accepts', () => {
    const bom = buildAibom(fixtureInput());
    const bytes = serializeAibom(bom);
    const statement = aibomStatement({
      runId: RUN_ID,
      bom,
      sha256: aibomDigest(bytes).slice('sha256:'.length),
    });
    expect(statement.predicateType).toBe('https://cyclonedx.org/bom');
  });
});

describe('buildAibom: determinism', () => {
  it('gives the same bytes for the same input, and does not mutate it', () => {
    const input = deepFreeze(fixtureInput());
    const a = serializeAibom(buildAibom(input));
    const b = serializeAibom(buildAibom(input));
    expect(a.equals(b)).toBe(true);
    expect(input).toEqual(fixtureInput());
  });

  it('ignores the order of object keys anywhere in the input', () => {
    const reversed: AibomInput = reverseKeys(fixtureInput());
    expect(Object.keys(reversed.run.spec)).toEqual(['steps', 'inputs', 'policyPack']);
    expect(serializeAibom(buildAibom(reversed))).toEqual(serializeAibom(buildAibom(fixtureInput())));
  });
});

describe('buildAibom: rejects what a Run CR cannot be', () => {
  const spec = (): RunSpec => fixtureRun().spec;

  it('needs a UUID run id and a terminal phase', () => {
    expect(codeOf(() => buildAibom({ ...fixtureInput(), run: { ...runWith(spec()), id: 'run-1' } }))).toBe(
      'INVALID_RUN',
    );
    const running = { ...runWith(spec()), phase: 'Running' } as unknown as AibomInput['run'];
    expect(codeOf(() => buildAibom(everyStepRan(running)))).toBe('INVALID_RUN');
    const cr = fixtureRun();
    cr.status = { phase: 'Running' };
    expect(codeOf(() => aibomRunOf(cr))).toBe('INVALID_RUN');
  });

  it('rejects duplicate or malformed step ids and steps without exactly one of model/tool', () => {
    const dup = spec();
    dup.steps[1]!.id = 'extract';
    expect(codeOf(() => buildAibom(everyStepRan(runWith(dup))))).toBe('INVALID_STEP');
    const colon = spec();
    colon.steps[0]!.id = 'a:b';
    expect(codeOf(() => buildAibom(everyStepRan(runWith(colon))))).toBe('INVALID_STEP');
    const both = spec();
    both.steps[0]!.model = { name: 'm', provider: 'p', version: '1' };
    expect(codeOf(() => buildAibom(everyStepRan(runWith(both))))).toBe('INVALID_STEP');
    const neither = spec();
    delete neither.steps[0]!.tool;
    expect(codeOf(() => buildAibom(everyStepRan(runWith(neither))))).toBe('INVALID_STEP');
    for (const t of [-0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const bad = spec();
      bad.steps[1]!.model!.temperature = t;
      expect(
        codeOf(() => buildAibom(everyStepRan(runWith(bad)))),
        String(t),
      ).toBe('INVALID_STEP');
    }
  });

  it('rejects attestation ids that are not UUIDs or are repeated', () => {
    const { run, attestationIds } = fixtureInput();
    expect(codeOf(() => buildAibom({ run, attestationIds: ['nope'], ranSteps: [] }))).toBe(
      'INVALID_ATTESTATION_ID',
    );
    expect(
      codeOf(() =>
        buildAibom({
          run,
          attestationIds: [attestationIds[0]!, attestationIds[0]!.toUpperCase()],
          ranSteps: [],
        }),
      ),
    ).toBe('INVALID_ATTESTATION_ID');
  });

  it('rejects inputs that are not JSON', () => {
    const bad = spec();
    bad.inputs = { when: new Date(0) };
    expect(codeOf(() => buildAibom(everyStepRan(runWith(bad))))).toBe('NOT_CANONICALIZABLE');
    const badStep = spec();
    badStep.steps[0]!.inputs = { n: Number.NaN };
    expect(codeOf(() => buildAibom(everyStepRan(runWith(badStep))))).toBe('NOT_CANONICALIZABLE');
  });
});

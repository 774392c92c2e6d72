import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  AttestError,
  PredicateTypes,
  STATEMENT_TYPE,
  aibomStatement,
  artifactStatement,
  capabilityStatement,
  jcsSha256Hex,
  policyStatement,
  predicateProblems,
  runStatement,
  statementPayload,
  statementProblems,
  stepStatement,
  type Statement,
} from '../../../src/attest/index.ts';
import {
  RUN_ID,
  aibomInput,
  artifactInput,
  capabilityInput,
  modelStepInput,
  policyInput,
  runInput,
  toolStepInput,
} from './fixtures.ts';
import { expectGoldenJson } from './golden.ts';

const cases: [string, () => Statement][] = [
  ['statement-run.json', () => runStatement(runInput)],
  ['statement-step-model.json', () => stepStatement(modelStepInput)],
  ['statement-step-tool.json', () => stepStatement(toolStepInput)],
  ['statement-artifact.json', () => artifactStatement(artifactInput)],
  ['statement-policy.json', () => policyStatement(policyInput)],
  ['statement-capability.json', () => capabilityStatement(capabilityInput)],
  ['statement-aibom.json', () => aibomStatement(aibomInput)],
];

describe('statement builders', () => {
  it.each(cases)('%s matches its golden file and its schemas', async (file, build) => {
    const statement = build();
    await expectGoldenJson(file, statement);
    expect(statementProblems(statement)).toEqual([]);
    expect(predicateProblems(statement.predicateType, statement.predicate)).toEqual([]);
    expect(statement._type).toBe(STATEMENT_TYPE);
  });

  it.each(cases)('%s payload is deterministic canonical JSON', (_file, build) => {
    const a = statementPayload(build());
    const b = statementPayload(build());
    expect(a.equals(b)).toBe(true);
    // Canonical: re-serialising the parsed payload reproduces the bytes.
    expect(statementPayload(JSON.parse(a.toString('utf8')) as Statement).equals(a)).toBe(true);
  });

  it('names subjects after the spec trust subjects', () => {
    expect(runStatement(runInput).subject[0]?.name).toBe(`run:${RUN_ID}`);
    expect(stepStatement(modelStepInput).subject[0]?.name).toBe(`step:${RUN_ID}:summarize`);
    expect(artifactStatement(artifactInput).subject[0]?.name).toBe(`artifact:${RUN_ID}:summary.json`);
    expect(policyStatement(policyInput).subject[0]?.name).toBe('policy:baseline@1.4.0');
    expect(capabilityStatement(capabilityInput).subject[0]?.name).toBe(`capability:${RUN_ID}:summarize:0`);
    expect(aibomStatement(aibomInput).subject[0]?.name).toBe(`artifact:${RUN_ID}:aibom`);
  });

  it('hashes step inputs and outputs as RFC 8785 JSON, independent of key order', () => {
    const s = stepStatement(modelStepInput);
    const reordered = stepStatement({
      ...modelStepInput,
      inputs: { document: 's3://inputs/report.pdf', prompt: 'Summarize the report' },
    });
    expect(s.predicate.inputDigest.sha256).toBe(reordered.predicate.inputDigest.sha256);
    // Independent computation: the JCS text written out by hand.
    const jcs = '{"document":"s3://inputs/report.pdf","prompt":"Summarize the report"}';
    expect(s.predicate.inputDigest.sha256).toBe(createHash('sha256').update(jcs).digest('hex'));
    expect(s.subject[0]?.digest.sha256).toBe(s.predicate.outputDigest.sha256);
  });

  it('builds SLSA provenance v1 with the run as invocation and deduplicated dependencies', () => {
    const { predicate, predicateType, subject } = runStatement(runInput);
    expect(predicateType).toBe('https://slsa.dev/provenance/v1');
    expect(predicate.runDetails.metadata.invocationId).toBe(RUN_ID);
    expect(predicate.runDetails.builder.id).toBe('https://vault.service.dev/controller');
    expect(predicate.buildDefinition.externalParameters).toEqual(runInput.spec);
    expect(predicate.buildDefinition.resolvedDependencies.map((d) => d.uri)).toEqual([
      'pkg:generic/openai/gpt-4o@2024-08-06',
      'pkg:generic/trivy@0.58.1',
    ]);
    expect(subject[0]?.digest.sha256).toBe(jcsSha256Hex(runInput.spec));
  });

  it('uses the documented predicate type URIs', () => {
    expect(stepStatement(modelStepInput).predicateType).toBe(
      'https://vault.service.dev/attestations/step/v1',
    );
    expect(policyStatement(policyInput).predicateType).toBe(
      'https://vault.service.dev/attestations/policy/v1',
    );
    expect(artifactStatement(artifactInput).predicateType).toBe(
      'https://vault.service.dev/attestations/artifact/v1',
    );
    expect(capabilityStatement(capabilityInput).predicateType).toBe(
      'https://vault.service.dev/attestations/capability/v1',
    );
    expect(aibomStatement(aibomInput).predicateType).toBe(PredicateTypes.aibom);
  });

  it('refuses to build predicates its own schema rejects', () => {
    const bad: [string, () => unknown][] = [
      ['run id not a UUID', () => policyStatement({ ...policyInput, runId: 'not-a-uuid' })],
      ['colon in step id', () => stepStatement({ ...modelStepInput, stepId: 'a:b' })],
      ['@ in pack name', () => policyStatement({ ...policyInput, pack: 'base@line' })],
      ['negative size', () => artifactStatement({ ...artifactInput, size: -1 })],
      ['upper-case digest', () => artifactStatement({ ...artifactInput, sha256: 'B'.repeat(64) })],
      ['empty chain', () => capabilityStatement({ ...capabilityInput, chain: [] })],
      ['timestamp without zone', () => stepStatement({ ...modelStepInput, startedAt: '2025-01-15 10:00' })],
      [
        'empty tool name',
        () => stepStatement({ ...toolStepInput, kind: 'tool', tool: { name: '', command: [] } }),
      ],
      ['BOM without bomFormat', () => aibomStatement({ ...aibomInput, bom: { components: [] } })],
      ['spec not an object', () => runStatement({ ...runInput, spec: ['x'] })],
    ];
    for (const [why, build] of bad) {
      expect(build, why).toThrow(AttestError);
      try {
        build();
      } catch (err) {
        expect((err as AttestError).code, why).toBe('PREDICATE_INVALID');
      }
    }
  });

  it('records a tool step without a command as command [] (the Run CRD admits one)', () => {
    const statement = stepStatement({ ...toolStepInput, kind: 'tool', tool: { name: 't', command: [] } });
    expect(statement.predicate).toMatchObject({ kind: 'tool', tool: { name: 't', command: [] } });
  });

  it('refuses inputs that are not plain JSON', () => {
    const cases: unknown[] = [
      NaN,
      Infinity,
      1n,
      new Date(0),
      () => 1,
      [undefined],
      { a: new Map() },
      '\ud800',
    ];
    for (const inputs of cases) {
      try {
        stepStatement({ ...modelStepInput, inputs });
        expect.unreachable(`accepted ${String(inputs)}`);
      } catch (err) {
        expect(err).toBeInstanceOf(AttestError);
        expect((err as AttestError).code).toBe('NOT_CANONICALIZABLE');
      }
    }
  });
});

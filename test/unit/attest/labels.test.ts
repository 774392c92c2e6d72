import { describe, expect, it } from 'vitest';
import {
  labelMismatches,
  labelStatement,
  RECORD_LABELS_ANNOTATION,
  recordIndex,
  sealStatement,
  signedLabels,
  stepStatement,
  type RecordLabels,
} from '../../../src/attest/index.ts';
import { verifyRecord } from '../../../src/attest/verify.ts';
import { modelStepInput } from './fixtures.ts';
import { p256Signer } from './keys.ts';

const signer = p256Signer();
const labels: RecordLabels = {
  namespace: 'team-a',
  kind: 'step',
  run_id: modelStepInput.runId,
  step_id: modelStepInput.stepId,
  policy_pack: 'baseline',
  policy_version: '1.0.0',
  capability_token_ids: ['capability:x:y:0', 'capability:x:y:0', 'capability:x:y:1'],
};

/** An API record of a labelled, signed step statement (the fields verify compares). */
function apiRecord(l: RecordLabels = labels) {
  const statement = labelStatement(stepStatement(modelStepInput), l);
  const sealed = sealStatement(statement, signer);
  const index = recordIndex(statement, l);
  return {
    record: {
      envelope: sealed.envelope,
      digest: sealed.digest,
      namespace: index.namespace,
      kind: index.kind,
      run_id: index.run_id,
      step_id: index.step_id,
      subjects: [...index.subjects],
      predicate_type: index.predicate_type,
    } as Record<string, unknown>,
    statement,
  };
}

describe('labels signed in the statement (ADR 0007)', () => {
  it('annotate the first subject only, and read back as signed', () => {
    const { statement } = apiRecord();
    expect(statement.subject[0]!.annotations![RECORD_LABELS_ANNOTATION]).toEqual({
      namespace: 'team-a',
      kind: 'step',
      run_id: modelStepInput.runId,
      step_id: modelStepInput.stepId,
      policy_pack: 'baseline',
      policy_version: '1.0.0',
      capability_token_ids: ['capability:x:y:0', 'capability:x:y:1'],
    });
    expect(signedLabels(statement)).toEqual({
      ...labels,
      capability_token_ids: ['capability:x:y:0', 'capability:x:y:1'],
    });
    // The statement stays valid for the verifier (schema, subject, predicate).
    const verdict = verifyRecord(apiRecord().record, { publicKeys: [signer.publicKey] });
    expect(verdict.problems).toEqual([]);
    expect(verdict.ok).toBe(true);
  });

  it('a malformed annotation is no label at all', () => {
    const statement = stepStatement(modelStepInput);
    for (const bad of [
      null,
      'team-a',
      { namespace: 1, kind: 'step' },
      { namespace: 'a', kind: 'step', run_id: 7 },
    ]) {
      const s = {
        ...statement,
        subject: [{ ...statement.subject[0]!, annotations: { [RECORD_LABELS_ANNOTATION]: bad } }],
      };
      expect(signedLabels(s), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it('service-ctl verify: every relabelled field fails with LABEL_MISMATCH', () => {
    const trust = { publicKeys: [signer.publicKey] };
    for (const [field, value] of [
      ['namespace', 'team-b'],
      ['kind', 'run'],
      ['run_id', '0190f3a0-0000-7000-8000-000000000000'],
      ['step_id', 'other'],
      ['step_id', null],
      ['subjects', ['step:x:y']],
      ['namespace', 42],
    ] as const) {
      const { record } = apiRecord();
      record[field] = value;
      const verdict = verifyRecord(record, trust);
      expect(verdict.ok, `${field} = ${JSON.stringify(value)}`).toBe(false);
      expect(verdict.problems.map((p) => p.code)).toEqual(['LABEL_MISMATCH']);
      expect(verdict.problems[0]!.message).toContain(field);
    }
  });

  it('a statement without labels binds its subjects and predicate type only', () => {
    const statement = stepStatement(modelStepInput);
    const names = statement.subject.map((s) => s.name);
    expect(labelMismatches({ namespace: 'anything', subjects: names }, statement)).toEqual([]);
    expect(labelMismatches({ subjects: ['run:other'] }, statement)).toEqual(['subjects']);
  });
});

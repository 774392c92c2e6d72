import { describe, expect, it } from 'vitest';
import { LAST_APPLIED_ANNOTATION, slimForCache } from '../../../src/kube/listwatch.ts';

describe('slimForCache', () => {
  it('drops managedFields and the last-applied annotation, keeping every other field', () => {
    const run = {
      metadata: {
        name: 'r',
        namespace: 'ns',
        labels: { team: 'a' },
        annotations: { [LAST_APPLIED_ANNOTATION]: '{"big":"copy"}', 'vault.service.dev/own': 'kept' },
        managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:spec': {} } }],
      },
      spec: { steps: [{ id: 's' }] },
      status: { phase: 'Succeeded' },
    };
    const slim = slimForCache(structuredClone(run));
    expect(slim).toEqual({
      metadata: {
        name: 'r',
        namespace: 'ns',
        labels: { team: 'a' },
        annotations: { 'vault.service.dev/own': 'kept' },
      },
      spec: run.spec,
      status: run.status,
    });
  });

  it('removes an annotations map that held only the last-applied copy, and leaves lean objects alone', () => {
    const only = slimForCache({ metadata: { name: 'r', annotations: { [LAST_APPLIED_ANNOTATION]: '{}' } } });
    expect(only).toEqual({ metadata: { name: 'r' } });
    const lean = { metadata: { name: 'r', annotations: { a: 'b' } }, spec: {} };
    expect(slimForCache(structuredClone(lean))).toEqual(lean);
    expect(slimForCache({ kind: 'NoMetadata' })).toEqual({ kind: 'NoMetadata' });
  });
});

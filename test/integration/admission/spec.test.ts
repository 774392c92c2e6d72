/**
 * Admission of Run specs on the real kube-apiserver (CRD schema + CEL of crds/ and its
 * ValidatingAdmissionPolicy): every shape the controller could not attest is refused with a message
 * that names the field, every odd but legal shape is admitted, and the spec cannot change after
 * creation. Most requests are `dryRun=All` (the whole admission chain, nothing stored).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { RunSpec, StepSpec } from '../../../src/crd/run.ts';
import {
  admit,
  applyPipelineStatus,
  client,
  createRun,
  expectRefused,
  freshNamespace,
  getRun,
  patchRun,
  toolStep,
} from './helpers.ts';

let ns: string;
beforeAll(async () => {
  ns = await freshNamespace('adm-spec');
});

/** Every kind of field the controller copies into a record, each set once. */
function base(): RunSpec {
  return {
    policyPack: { name: 'baseline', version: '1.0.0', guardrails: ['pii-redaction'] },
    inputs: { ticket: 'SUP-1' },
    steps: [
      {
        id: 'fetch',
        tool: { name: 'curl', command: ['curl', '-s'] },
        policyPack: { name: 'egress', version: '0.3.0', guardrails: ['egress-allowlist'] },
        capabilities: [{ scope: 'net:read', grantedBy: 'team:a', approvedBy: 'user:b' }],
        inputs: { url: 'https://example.com' },
      },
      {
        id: 'sum',
        dependsOn: ['fetch'],
        model: { name: 'm', provider: 'p', version: '1', temperature: 0.2 },
      },
    ],
  };
}

const step = (spec: RunSpec, i: number): StepSpec => spec.steps[i]!;

/** Every typed string of the spec: the path the API server reports, and how to set it. */
const STRING_FIELDS: readonly [string, (s: RunSpec, v: string) => void][] = [
  ['spec.policyPack.name', (s, v) => (s.policyPack!.name = v)],
  ['spec.policyPack.version', (s, v) => (s.policyPack!.version = v)],
  ['spec.policyPack.guardrails[0]', (s, v) => (s.policyPack!.guardrails![0] = v)],
  ['spec.steps[0].id', (s, v) => (step(s, 0).id = v)],
  ['spec.steps[1].dependsOn[0]', (s, v) => (step(s, 1).dependsOn![0] = v)],
  ['spec.steps[0].policyPack.name', (s, v) => (step(s, 0).policyPack!.name = v)],
  ['spec.steps[0].policyPack.version', (s, v) => (step(s, 0).policyPack!.version = v)],
  ['spec.steps[0].policyPack.guardrails[0]', (s, v) => (step(s, 0).policyPack!.guardrails![0] = v)],
  ['spec.steps[0].tool.name', (s, v) => (step(s, 0).tool!.name = v)],
  ['spec.steps[0].tool.command[1]', (s, v) => (step(s, 0).tool!.command![1] = v)],
  ['spec.steps[0].capabilities[0].scope', (s, v) => (step(s, 0).capabilities![0]!.scope = v)],
  ['spec.steps[0].capabilities[0].grantedBy', (s, v) => (step(s, 0).capabilities![0]!.grantedBy = v)],
  ['spec.steps[0].capabilities[0].approvedBy', (s, v) => (step(s, 0).capabilities![0]!.approvedBy = v)],
  ['spec.steps[1].model.name', (s, v) => (step(s, 1).model!.name = v)],
  ['spec.steps[1].model.provider', (s, v) => (step(s, 1).model!.provider = v)],
  ['spec.steps[1].model.version', (s, v) => (step(s, 1).model!.version = v)],
];

/** C0 (NUL, TAB, LF, CR, ESC, US), DEL and C1 (PAD, NEL, APC). */
const CONTROL = [
  '\u0000',
  '\u0001',
  '\t',
  '\n',
  '\r',
  '\u001b',
  '\u001f',
  '\u007f',
  '\u0080',
  '\u0085',
  '\u009f',
];

const withField = (set: (s: RunSpec, v: string) => void, value: string): RunSpec => {
  const spec = base();
  set(spec, value);
  return spec;
};

describe('the base spec', () => {
  it('is admitted (every refusal below is caused by the one change it makes)', async () => {
    const run = await admit(ns, base());
    expect(run.spec).toEqual(base());
  });
});

describe('the name', () => {
  it("is at most 63 characters (it labels the Run's Attestation resources): 63 admitted, 64 refused", async () => {
    await expect(admit(ns, base(), 'a'.repeat(63))).resolves.toMatchObject({
      metadata: { name: 'a'.repeat(63) },
    });
    await expectRefused(admit(ns, base(), 'a'.repeat(64)), "a Run's name has at most 63 characters");
    await expectRefused(admit(ns, base(), `${'a'.repeat(100)}.example`), 'at most 63 characters');
  });
});

describe('control characters', () => {
  for (const [path, set] of STRING_FIELDS) {
    it(`are refused in ${path}`, async () => {
      for (const c of CONTROL) {
        await expectRefused(admit(ns, withField(set, `a${c}b`)), path);
      }
    });
  }
});

/**
 * Unicode format characters (category Cf, issue 22 item 15): bidi overrides and isolates, zero-width
 * characters, the soft hyphen. Invisible or reordering: `user:\u202eecila` reads as `user:alice`.
 */
const FORMAT = [
  '\u00ad',
  '\u061c',
  '\u200b',
  '\u200c',
  '\u200d',
  '\u200e',
  '\u202a',
  '\u202e',
  '\u2066',
  '\u2069',
  '\ufeff',
  '\u{e0001}',
];

describe('format characters (bidi overrides, zero-width)', () => {
  // A step id and a dependsOn entry are [-a-z0-9_.] only: refused already.
  for (const [path, set] of STRING_FIELDS) {
    it(`are refused in ${path}`, async () => {
      for (const c of FORMAT) await expectRefused(admit(ns, withField(set, `a${c}b`)), path);
    });
  }

  it('a principal that reads as another is refused; the same letters without the override are admitted', async () => {
    const spec = base();
    step(spec, 0).capabilities![0]!.grantedBy = 'user:\u202eecila';
    await expectRefused(admit(ns, spec), 'spec.steps[0].capabilities[0].grantedBy');
    step(spec, 0).capabilities![0]!.grantedBy = 'user:ecila';
    await admit(ns, spec);
  });
});

describe('policy pack names and versions', () => {
  // What the policy and step predicates and the AIBOM refuse (JavaScript's \s is Unicode-wide,
  // Go's is ASCII only: the CRD pattern spells out the difference).
  const separators = [
    ' ',
    '@',
    '\u00a0',
    '\u1680',
    '\u2003',
    '\u2028',
    '\u2029',
    '\u202f',
    '\u3000',
    '\ufeff',
  ];
  for (const path of ['spec.policyPack.name', 'spec.steps[0].policyPack.version']) {
    it(`refuse whitespace, '@' and BOM in ${path}`, async () => {
      const set = STRING_FIELDS.find(([p]) => p === path)![1];
      for (const c of separators) await expectRefused(admit(ns, withField(set, `a${c}b`)), path);
    });
  }

  it('admit an empty version (recorded as "unversioned") and non-Latin names', async () => {
    const spec = base();
    spec.policyPack = { name: 'ポリシー-🛡️', version: '' };
    step(spec, 0).policyPack = { name: 'strict' };
    await admit(ns, spec);
  });
});

describe('empty strings the records refuse', () => {
  for (const path of [
    'spec.policyPack.guardrails[0]',
    'spec.steps[0].capabilities[0].approvedBy',
    'spec.steps[0].tool.name',
    'spec.steps[1].model.version',
  ]) {
    it(`are refused in ${path}`, async () => {
      const set = STRING_FIELDS.find(([p]) => p === path)![1];
      // Principals are <type>:<name>, so at least 3 characters (docs/capabilities.md).
      const min = path.endsWith('approvedBy') ? 3 : 1;
      await expectRefused(admit(ns, withField(set, '')), path, `at least ${min} chars long`);
    });
  }
});

describe('dependencies', () => {
  it('refuse a dependsOn naming no step', async () => {
    const spec = base();
    step(spec, 1).dependsOn = ['fetch', 'nope'];
    await expectRefused(
      admit(ns, spec),
      'spec.steps',
      'step sum depends on a step that is not in spec.steps',
    );
  });

  it('refuse a step depending on itself', async () => {
    const spec = base();
    step(spec, 1).dependsOn = ['sum'];
    await expectRefused(admit(ns, spec), 'spec.steps[1].dependsOn', 'step sum depends on itself');
  });

  it('refuse a cycle of two', async () => {
    const spec = base();
    step(spec, 0).dependsOn = ['sum'];
    await expectRefused(admit(ns, spec), 'spec.steps', 'step fetch depends on a step listed after it');
  });

  it('refuse a longer cycle', async () => {
    const spec: RunSpec = {
      steps: [
        toolStep('a', { dependsOn: ['d'] }),
        toolStep('b', { dependsOn: ['a'] }),
        toolStep('c', { dependsOn: ['b'] }),
        toolStep('d', { dependsOn: ['c'] }),
      ],
    };
    await expectRefused(admit(ns, spec), 'spec.steps', 'step a depends on a step listed after it');
  });

  it('refuse a duplicate entry', async () => {
    const spec = base();
    step(spec, 1).dependsOn = ['fetch', 'fetch'];
    await expectRefused(admit(ns, spec), 'spec.steps[1].dependsOn', 'dependsOn lists fetch more than once');
  });

  it('admit a diamond listed in dependency order', async () => {
    const spec: RunSpec = {
      steps: [
        toolStep('a'),
        toolStep('b', { dependsOn: ['a'] }),
        toolStep('c', { dependsOn: ['a'] }),
        toolStep('d', { dependsOn: ['c', 'b'] }),
      ],
    };
    await admit(ns, spec);
  });
});

describe('a step', () => {
  it('with both model and tool, or neither, is refused', async () => {
    const both = base();
    step(both, 1).tool = { name: 't' };
    await expectRefused(admit(ns, both), 'spec.steps[1]', 'exactly one of model or tool');
    const neither: RunSpec = { steps: [{ id: 'x' }] };
    await expectRefused(admit(ns, neither), 'spec.steps[0]', 'exactly one of model or tool');
  });

  it('a tool step without a command is admitted (recorded as command [])', async () => {
    await admit(ns, { steps: [{ id: 'api-call', tool: { name: 'http' } }] });
  });
});

describe('bounds (docs/runs.md: at most 2 x 128 + 256 + 5 records per Run)', () => {
  const steps = (n: number, extra: (i: number) => Record<string, unknown> = () => ({})) =>
    Array.from({ length: n }, (_, i) => toolStep(`s${i}`, extra(i)));
  const cap = (i: number) => ({ scope: `scope-${i}`, grantedBy: 'team:a' });

  it('refuse a 129th step', async () => {
    await expectRefused(admit(ns, { steps: steps(129) }), 'spec.steps', 'must have at most 128 items');
  });

  it('refuse a 33rd dependsOn entry', async () => {
    const spec: RunSpec = {
      steps: [...steps(33), toolStep('last', { dependsOn: steps(33).map((s) => s.id) })],
    };
    await expectRefused(admit(ns, spec), 'spec.steps[33].dependsOn', 'must have at most 32 items');
  });

  it('refuse a 17th capability of a step', async () => {
    const spec: RunSpec = {
      steps: [toolStep('a', { capabilities: Array.from({ length: 17 }, (_, i) => cap(i)) })],
    };
    await expectRefused(admit(ns, spec), 'spec.steps[0].capabilities', 'must have at most 16 items');
  });

  it('refuse a 257th capability of a run', async () => {
    const spec: RunSpec = {
      steps: steps(17, (i) => ({
        capabilities: Array.from({ length: i === 16 ? 1 : 16 }, (_, j) => cap(j)),
      })),
    };
    await expectRefused(admit(ns, spec), 'spec.steps', 'more than 256 capabilities');
  });

  it('admit (and store) the largest Run the bounds allow', async () => {
    const long = (c: string, n: number) => c.repeat(n);
    const ids = Array.from({ length: 128 }, (_, i) => `s${String(i).padStart(3, '0')}-${long('x', 58)}`);
    const spec: RunSpec = {
      policyPack: {
        name: long('p', 253),
        version: long('v', 128),
        guardrails: Array.from({ length: 64 }, (_, i) => `${i}${long('g', 250)}`),
      },
      steps: ids.map((id, i) => ({
        id,
        // Up to 32 of the steps listed before it.
        ...(i > 0 ? { dependsOn: ids.slice(Math.max(0, i - 32), i) } : {}),
        ...(i % 2 === 0
          ? {
              tool: {
                name: long('t', 253),
                command: Array.from({ length: 128 }, (_, j) => `${j}${long('a', 20)}`),
              },
            }
          : {
              model: {
                name: long('m', 253),
                provider: long('q', 253),
                version: long('1', 128),
                temperature: 10,
              },
            }),
        policyPack: { name: `pack-${i % 4}`, version: long('2', 128) },
        capabilities: Array.from({ length: 2 }, (_, j) => ({
          scope: long('s', 253),
          grantedBy: `team:${long('g', 248)}`,
          approvedBy: `user:${j}${long('a', 247)}`,
        })),
      })),
    };
    expect(spec.steps.reduce((n, s) => n + (s.capabilities?.length ?? 0), 0)).toBe(256);
    const created = await createRun(ns, 'largest', spec);
    expect(created.spec.steps).toHaveLength(128);
    // And the pipeline can move all 128 steps through to Succeeded in one apply.
    const steps = ids.map((id) => ({ id, phase: 'Succeeded' as const, output: { id } }));
    const done = await applyPipelineStatus(ns, 'largest', { phase: 'Succeeded', steps });
    expect(done.status?.phase).toBe('Succeeded');
  });
});

describe('NUL in free-form JSON (ValidatingAdmissionPolicy)', () => {
  it('is refused in spec.inputs, however deep, in keys and in values', async () => {
    for (const inputs of [
      { q: 'a\u0000b' },
      { 'k\u0000': 1 },
      { a: [{ b: { c: ['\u0000'] } }] },
      { a: '\\\u0000' },
    ]) {
      await expectRefused(admit(ns, { ...base(), inputs }), 'spec.inputs', 'NUL character');
    }
  });

  it('is refused in spec.steps[].inputs, naming the step', async () => {
    const spec = base();
    step(spec, 0).inputs = { deep: [[[{ x: 'ok' }, { y: '\u0000' }]]] };
    await expectRefused(admit(ns, spec), 'spec.steps[id=fetch].inputs', 'NUL character');
  });

  it('is not confused by the text \\x00 or by other control characters', async () => {
    const spec = base();
    spec.inputs = { a: '\\x00', b: ['\\\\x00', { '\\x00': '\\\\\\x00' }], c: '\n\t\u0001\u007f\u2028' };
    step(spec, 0).inputs = { prompt: 'line 1\nline 2\ttab \u001b[0m' };
    await admit(ns, spec);
  });

  it('checks a Run near the size limit within the policy cost budget', async () => {
    // 1.4 million backslashes print as 2.8 million characters: the most expensive input there is.
    const spec: RunSpec = { inputs: { a: `${'\\'.repeat(1_400_000)}x00` }, steps: [] };
    await admit(ns, spec);
    spec.inputs = { a: `${'\\'.repeat(1_400_000)}\u0000` };
    await expectRefused(admit(ns, spec), 'spec.inputs', 'NUL character');
  });

  it('refuses, never admits unchecked, a value too costly to check (docs/runs.md)', async () => {
    // 300,000 unassigned code points print as \U000e0080 each: 3 million characters holding \x00.
    const spec: RunSpec = { inputs: { a: `${'\u{e0080}'.repeat(300_000)}\\x00` }, steps: [] };
    await expectRefused(admit(ns, spec), 'cost limit exceeded');
  });
});

describe('odd but legal strings', () => {
  it('are admitted everywhere', async () => {
    const odd = [
      'café', // precomposed
      'cafe\u0301', // combining mark
      '👩🏽💻', // emoji with a skin tone (a ZWJ sequence holds U+200D, a format character: refused above)
      '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', // astral plane
      'مرحبا', // right to left
      '中文模型',
      '\ufffd',
      '"quotes" \\ backslash / slash',
      '<script>',
    ];
    for (const [path, set] of STRING_FIELDS) {
      if (path.endsWith('.id') || path.includes('dependsOn') || path.includes('policyPack.name')) continue;
      if (path.includes('policyPack.version')) continue;
      // Scopes and principals have a grammar (docs/capabilities.md): no whitespace, principals
      // typed; any other character is as legal there as elsewhere.
      const shape = path.endsWith('.scope')
        ? (v: string) => v.replaceAll(' ', '-')
        : path.endsWith('By')
          ? (v: string) => `user:${v.replaceAll(' ', '-')}`
          : (v: string) => v;
      for (const v of odd.map(shape)) {
        const result = await admit(ns, withField(set, v)).catch((e: unknown) => e);
        expect(result, `${path} = ${JSON.stringify(v)}`).not.toBeInstanceOf(Error);
      }
    }
  });
});

describe('the spec after creation', () => {
  let name: string;
  beforeAll(async () => {
    name = 'immutable';
    await createRun(ns, name, base());
  });

  it('cannot change: merge patch of a tool name', async () => {
    await expectRefused(
      patchRun(ns, name, { spec: { steps: [{ id: 'fetch', tool: { name: 'wget' } }] } }),
      'spec',
      'spec is immutable',
    );
  });

  it('cannot change: JSON patch of the policy pack name, of inputs, adding a step', async () => {
    for (const ops of [
      [{ op: 'replace', path: '/spec/policyPack/name', value: 'other' }],
      [{ op: 'replace', path: '/spec/inputs/ticket', value: 'SUP-2' }],
      [{ op: 'add', path: '/spec/steps/-', value: toolStep('late') }],
      [{ op: 'remove', path: '/spec/steps/1/model/temperature' }],
    ]) {
      await expectRefused(patchRun(ns, name, ops, { type: 'json' }), 'spec', 'spec is immutable');
    }
  });

  it('cannot change: server-side apply of a different spec', async () => {
    const changed = base();
    step(changed, 1).model!.version = '2';
    await expectRefused(
      client().request({
        method: 'PATCH',
        path: `/apis/vault.service.dev/v1/namespaces/${ns}/runs/${name}`,
        query: { fieldManager: 'pipeline', force: true },
        contentType: 'application/apply-patch+yaml',
        body: {
          apiVersion: 'vault.service.dev/v1',
          kind: 'Run',
          metadata: { name, namespace: ns },
          spec: changed,
        },
      }),
      'spec is immutable',
    );
    expect((await getRun(ns, name)).spec).toEqual(base());
  });

  it('keeps metadata writable: labels, annotations, finalizers (also once terminal)', async () => {
    await applyPipelineStatus(ns, name, {
      phase: 'Failed',
      steps: [{ id: 'fetch', phase: 'Failed', error: 'x' }],
    });
    const patched = await patchRun(ns, name, {
      metadata: { labels: { team: 'a' }, annotations: { note: 'x' }, finalizers: ['example.com/hold'] },
    });
    expect(patched.metadata.labels).toMatchObject({ team: 'a' });
    const released = await patchRun(ns, name, { metadata: { finalizers: null } });
    expect(released.metadata.finalizers).toBeUndefined();
    // An identical re-apply of the spec (what `kubectl apply` of the same file does) is fine.
    await patchRun(ns, name, { spec: base() });
  });
});

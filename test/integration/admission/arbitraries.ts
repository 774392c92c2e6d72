/**
 * Generators of Run specs for the admission property test: each value comes with `ok`, whether every
 * choice that made it was legal (so a legal spec that is refused is caught as over-refusal).
 */
import fc from 'fast-check';
import {
  DATASET_TYPES,
  type Capability,
  type DatasetSpec,
  type DatasetType,
  type PolicyPackRef,
  type RunSpec,
  type StepSpec,
} from '../../../src/crd/run.ts';

/** A generated value and whether every choice that made it was legal. */
export interface G<T> {
  readonly v: T;
  readonly ok: boolean;
}
export type Arb<T> = fc.Arbitrary<G<T>>;

const good = <T>(a: fc.Arbitrary<T>): Arb<T> => a.map((v) => ({ v, ok: true }));
const bad = <T>(a: fc.Arbitrary<T>): Arb<T> => a.map((v) => ({ v, ok: false }));
/** Mostly legal; illegal with weight `w` against 20 (w = 0: always legal). */
const pick = <T>(w: number, legal: Arb<T>, illegal: Arb<T>): Arb<T> =>
  w === 0 ? legal : fc.oneof({ arbitrary: legal, weight: 20 }, { arbitrary: illegal, weight: w });
/** Present or absent (undefined), both legal. */
const maybe = <T>(a: Arb<T>): Arb<T | undefined> =>
  fc.option(a, { nil: undefined }).map((g) => g ?? { v: undefined, ok: true });
const all = <T>(items: readonly G<T>[]): G<T[]> => ({
  v: items.map((i) => i.v),
  ok: items.every((i) => i.ok),
});

const cpLen = (s: string) => [...s].length;
/** No control and no format characters (bidi overrides, zero-width: issue 22 item 15). */
const noControl = (s: string) => !/[\p{Cc}\p{Cf}]/u.test(s);
const ODD = [
  'café',
  'cafe\u0301',
  '👩🏽💻',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  'مرحبا بالعالم',
  '中文模型',
  'no\u00a0break',
  '\ufffd',
  '"quoted" \\ /',
  '<script>',
  ' leading and trailing ',
];
const CONTROL = [
  '\u0000',
  '\u0001',
  '\t',
  '\n',
  '\r',
  '\u001b',
  '\u007f',
  '\u0085',
  '\u009f',
  // Format characters (Cf), refused like controls.
  '\u200b',
  '\u200d',
  '\u202e',
  '\u2066',
];
const withControl = fc
  .tuple(fc.constantFrom(...CONTROL), fc.string({ maxLength: 5 }))
  .map(([c, s]) => `${s}${c}x`);

/** Free text (names, scopes, principals): 1..max code points, no control characters. */
const text = (w: number, max: number): Arb<string> =>
  pick(
    w,
    good(
      fc.oneof(
        { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }), weight: 6 },
        { arbitrary: fc.constantFrom(...ODD), weight: 3 },
        { arbitrary: fc.constant('x'.repeat(max)), weight: 1 },
      ),
    ).filter((g) => noControl(g.v) && cpLen(g.v) >= 1 && cpLen(g.v) <= max),
    bad(fc.oneof(fc.constant(''), withControl, fc.constant('y'.repeat(max + 1)))),
  );

/** Pack names and versions: no '@', whitespace (Unicode-wide), BOM or control characters. */
const PACK_TOKEN = /^[^@\s\p{Z}\p{Cc}\p{Cf}\ufeff]+$/u;
const packName = (w: number): Arb<string> =>
  pick(
    w,
    good(
      fc.oneof(
        fc.constantFrom('baseline', 'strict', 'egress', 'ポリシー', '🛡️', 'a/b.c_d', 'x'.repeat(253)),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 10 }),
      ),
    ).filter((g) => PACK_TOKEN.test(g.v) && cpLen(g.v) <= 253),
    bad(fc.constantFrom('', 'a b', 'a@b', 'a\u00a0b', 'a\u2028b', '\ufeffa', 'a\u0001', 'a\u3000b')),
  );
const packVersion = (w: number): Arb<string> =>
  pick(
    w,
    good(fc.constantFrom('', '1.0.0', 'v2', '2025-05-14', '版本', 'x'.repeat(128))),
    bad(fc.constantFrom('1 0', '1@2', 'x'.repeat(129), '\u3000', 'a\n')),
  );

const policyPack = (w: number): Arb<PolicyPackRef> =>
  fc
    .record({
      name: packName(w),
      version: maybe(packVersion(w)),
      guardrails: maybe(fc.array(text(w, 253), { maxLength: 4 }).map(all)),
    })
    .map(({ name, version, guardrails }) => ({
      v: {
        name: name.v,
        ...(version.v !== undefined ? { version: version.v } : {}),
        // Duplicates are legal: the recorder deduplicates.
        ...(guardrails.v !== undefined ? { guardrails: [...guardrails.v, ...guardrails.v.slice(0, 1)] } : {}),
      },
      ok: name.ok && version.ok && guardrails.ok,
    }));

/** Scopes (docs/capabilities.md): `*` or `:`-separated segments without whitespace, `*` or controls. */
const SCOPE_SEGMENT = /^[^:*\s\p{Z}\ufeff\p{Cc}\p{Cf}]+$/u;
const scopeOf = (w: number): Arb<string> =>
  pick(
    w,
    good(
      fc.oneof(
        fc.constantFrom('kb:read', '*', 'tickets:comment', 'ü:ß', '🛡️:x/y', 's'.repeat(253)),
        fc
          .array(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 4 })
          .map((parts) => parts.join(':')),
      ),
    ).filter((g) => g.v === '*' || (g.v.split(':').every((p) => SCOPE_SEGMENT.test(p)) && cpLen(g.v) <= 253)),
    bad(fc.constantFrom('', 'kb read', 'kb:', ':kb', 'kb:*', 'a\u00a0b', 'x'.repeat(254), 'a\u0001')),
  );
/** Principals: `<type>:<name>`, 3-253 characters. */
const principalOf = (w: number): Arb<string> =>
  pick(
    w,
    good(
      fc.oneof(
        fc.constantFrom('user:alice', 'team:support-platform', 'system:serviceaccount:ns:sa', 'user:é@x'),
        fc
          .string({ unit: 'grapheme', minLength: 1, maxLength: 10 })
          .map((n) => `user:${n}`)
          .filter((p) => /^user:[^\s\p{Z}\ufeff\p{Cc}\p{Cf}]+$/u.test(p)),
        fc.constant(`team:${'x'.repeat(248)}`),
      ),
    ),
    bad(
      fc.constantFrom(
        '',
        'alice',
        'User:a',
        'user:',
        'user:a b',
        `team:${'x'.repeat(249)}`,
        'user:a\u0085',
        'user:\u202eecila',
      ),
    ),
  );

const capability = (w: number): Arb<Capability> =>
  fc
    .record({ scope: scopeOf(w), grantedBy: principalOf(w), approvedBy: maybe(principalOf(w)) })
    .map(({ scope, grantedBy, approvedBy }) => ({
      v: {
        scope: scope.v,
        grantedBy: grantedBy.v,
        ...(approvedBy.v !== undefined ? { approvedBy: approvedBy.v } : {}),
      },
      ok: scope.ok && grantedBy.ok && approvedBy.ok,
    }));

/** Dataset locations: absolute URIs without whitespace or control characters. */
const location = (w: number): Arb<string> =>
  pick(
    w,
    good(
      fc.oneof(
        fc.constantFrom(
          'https://data.example.com/sets/v1.parquet',
          's3://bucket/key%20with-escape',
          'urn:dataset:incidents-7',
          'hf://datasets/org/name@main',
          'https://x/{odd}|chars^`[x]#a#b%zz',
          'https://例え.jp/データ',
          'file:///data/a.csv',
        ),
        fc.webUrl({ withQueryParameters: true, withFragments: true }),
      ),
    ).filter((g) => /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\p{Z}\ufeff\p{Cc}]+$/u.test(g.v) && g.v.length <= 2048),
    bad(
      fc.constantFrom(
        'no-scheme',
        '1http://x',
        'http://a b',
        'http:',
        'https://x/\u0085',
        `https://x/${'y'.repeat(2048)}`,
      ),
    ),
  );

const dataset = (w: number): Arb<DatasetSpec> =>
  fc
    .record({
      name: text(w, 253),
      provider: text(w, 253),
      version: maybe(text(w, 128)),
      location: maybe(location(w)),
      type: maybe(
        pick(w, good(fc.constantFrom(...DATASET_TYPES)), bad(fc.constantFrom('noAssertion', 'Text', ''))),
      ),
      sha256: maybe(
        pick(
          w,
          good(fc.stringMatching(/^[0-9a-f]{64}$/)),
          bad(fc.constantFrom('ABC', 'a'.repeat(63), 'A'.repeat(64))),
        ),
      ),
    })
    .map(({ name, provider, version, location, type, sha256 }) => ({
      v: {
        name: name.v,
        provider: provider.v,
        ...(version.v !== undefined ? { version: version.v } : {}),
        ...(location.v !== undefined ? { location: location.v } : {}),
        ...(type.v !== undefined ? { type: type.v as DatasetType } : {}),
        ...(sha256.v !== undefined ? { sha256: sha256.v } : {}),
      },
      ok: name.ok && provider.ok && version.ok && location.ok && type.ok && sha256.ok,
    }));

const temperature = (w: number): Arb<number> =>
  pick(
    w,
    good(
      fc.oneof(
        fc.constantFrom(0, 1, 10, 0.2),
        fc.double({ min: 0, max: 10, noNaN: true, noDefaultInfinity: true }),
      ),
    ),
    bad(fc.constantFrom(-0.5, 10.5, 1e9)),
  );

/** One step's kind: a model or a tool (illegal: both, or neither). */
const kind = (w: number): Arb<Pick<StepSpec, 'model' | 'tool'>> => {
  const model = fc
    .record({
      name: text(w, 253),
      provider: text(w, 253),
      version: text(w, 128),
      temperature: maybe(temperature(w)),
    })
    .map(({ name, provider, version, temperature: t }) => ({
      v: {
        name: name.v,
        provider: provider.v,
        version: version.v,
        ...(t.v !== undefined ? { temperature: t.v } : {}),
      },
      ok: name.ok && provider.ok && version.ok && t.ok,
    }));
  const commandArg = pick(
    w,
    good(
      fc.oneof(
        fc.constant(''),
        fc.string({ unit: 'grapheme', maxLength: 12 }).filter(noControl),
        fc.constantFrom(...ODD),
      ),
    ),
    bad(withControl),
  );
  const tool = fc
    .record({ name: text(w, 253), command: maybe(fc.array(commandArg, { maxLength: 5 }).map(all)) })
    .map(({ name, command }) => ({
      v: { name: name.v, ...(command.v !== undefined ? { command: command.v } : {}) },
      ok: name.ok && command.ok,
    }));
  return pick(
    w,
    fc.oneof(
      model.map((m) => ({ v: { model: m.v }, ok: m.ok })),
      tool.map((t) => ({ v: { tool: t.v }, ok: t.ok })),
    ),
    fc.oneof(
      fc.tuple(model, tool).map(([m, t]) => ({ v: { model: m.v, tool: t.v }, ok: false })),
      fc.constant({ v: {}, ok: false }),
    ),
  );
};

/** Free JSON; illegal: a NUL somewhere in it (value or key). */
const json = (w: number): Arb<Record<string, unknown>> =>
  pick(
    w,
    good(
      fc.dictionary(fc.string({ unit: 'grapheme', maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), {
        maxKeys: 4,
      }),
    ).filter((g) => !JSON.stringify(g.v).includes('\\u0000')),
    bad(
      fc.constantFrom<Record<string, unknown>>(
        { q: 'a\u0000' },
        { 'k\u0000': 1 },
        { deep: [{ x: { y: ['\u0000'] } }] },
      ),
    ),
  );

const ID = /^[a-z0-9]([-a-z0-9_.]{0,10}[a-z0-9])?$/;
const BAD_IDS = ['A', '-a', 'a-', 'a:b', 'a b', '', 'é', 'x'.repeat(64)];

/** A whole spec: n steps with unique ids, each depending on earlier steps only (when legal). */
const idArb = fc.stringMatching(ID);

function spec(w: number, sizes: fc.Arbitrary<number>): Arb<RunSpec> {
  // Arbitraries are built once, outside chain: building one (a regex, a union) costs far more
  // than drawing from it.
  const runPack = maybe(policyPack(w));
  const inputs = maybe(json(w));
  const step = fc.record({
    kind: kind(w),
    inputs: maybe(json(w)),
    policyPack: maybe(policyPack(w)),
    capabilities: maybe(fc.array(capability(w), { maxLength: 3 }).map(all)),
    datasets: maybe(fc.array(dataset(w), { maxLength: 3 }).map(all)),
    deps: fc.array(fc.nat(), { maxLength: 4 }),
    badDep: pick(w, good(fc.constant('none')), bad(fc.constantFrom('forward', 'self', 'unknown', 'twice'))),
    badId: pick(w, good(fc.constant(undefined)), bad(fc.constantFrom(...BAD_IDS, 'duplicate'))),
  });
  return sizes.chain((n) =>
    fc
      .record({
        ids: fc.uniqueArray(idArb, { minLength: n, maxLength: n }),
        runPack,
        inputs,
        steps: fc.array(step, { minLength: n, maxLength: n }),
      })
      .map(({ ids, runPack, inputs, steps }) => {
        let ok = runPack.ok && inputs.ok;
        const out: StepSpec[] = steps.map((s, i) => {
          ok &&=
            s.kind.ok &&
            s.inputs.ok &&
            s.policyPack.ok &&
            s.capabilities.ok &&
            s.datasets.ok &&
            s.badDep.ok &&
            s.badId.ok;
          const earlier = ids.slice(0, i);
          const deps =
            earlier.length === 0 ? [] : [...new Set(s.deps.map((d) => earlier[d % earlier.length]!))];
          const id = ids[i]!;
          switch (s.badDep.v) {
            case 'forward':
              if (i + 1 < ids.length) deps.push(ids[i + 1]!);
              else deps.push(id);
              break;
            case 'self':
              deps.push(id);
              break;
            case 'unknown':
              deps.push('ghost-step');
              break;
            case 'twice':
              deps.push(deps[0] ?? id, deps[0] ?? id);
          }
          const badId = s.badId.v === 'duplicate' ? (i > 0 ? ids[0]! : 'UPPER') : s.badId.v;
          return {
            id: badId ?? id,
            ...(deps.length > 0 ? { dependsOn: deps } : {}),
            ...(s.inputs.v !== undefined ? { inputs: s.inputs.v } : {}),
            ...(s.policyPack.v !== undefined ? { policyPack: s.policyPack.v } : {}),
            ...s.kind.v,
            ...(s.capabilities.v !== undefined ? { capabilities: s.capabilities.v } : {}),
            ...(s.datasets.v !== undefined ? { datasets: s.datasets.v } : {}),
          };
        });
        return {
          v: {
            ...(runPack.v !== undefined ? { policyPack: runPack.v } : {}),
            ...(inputs.v !== undefined ? { inputs: inputs.v } : {}),
            steps: out,
          },
          ok,
        };
      }),
  );
}

/** Over the bounds (docs/runs.md): 129 steps; 17 capabilities in a step; 257 in a run; 33 dependsOn. */
const overBounds: Arb<RunSpec> = fc.constantFrom('steps', 'stepCaps', 'runCaps', 'deps').map((what) => {
  const tool = (id: string, extra: Partial<StepSpec> = {}): StepSpec => ({
    id,
    tool: { name: 't' },
    ...extra,
  });
  const caps = (n: number) => Array.from({ length: n }, (_, i) => ({ scope: `s${i}`, grantedBy: 'team:g' }));
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `s${i}`);
  switch (what) {
    case 'steps':
      return { v: { steps: ids(129).map((id) => tool(id)) }, ok: false };
    case 'stepCaps':
      return { v: { steps: [tool('a', { capabilities: caps(17) })] }, ok: false };
    case 'runCaps':
      return { v: { steps: ids(17).map((id) => tool(id, { capabilities: caps(16) })) }, ok: false };
    default:
      return {
        v: { steps: [...ids(33).map((id) => tool(id)), tool('z', { dependsOn: ids(33) })] },
        ok: false,
      };
  }
});

/** At the bounds: 128 steps, 32 dependsOn each, 256 capabilities. Legal. */
const atBounds: Arb<RunSpec> = fc.constant({
  v: {
    steps: Array.from({ length: 128 }, (_, i) => ({
      id: `s${i}`,
      ...(i > 0 ? { dependsOn: Array.from({ length: Math.min(i, 32) }, (_, j) => `s${i - 1 - j}`) } : {}),
      ...(i % 2 ? { model: { name: 'm', provider: 'p', version: '1' } } : { tool: { name: 't' } }),
      capabilities: [
        { scope: 'a', grantedBy: 'team:g' },
        { scope: 'b', grantedBy: 'team:g', approvedBy: 'user:h' },
      ],
    })),
  },
  ok: true,
});

export const runSpecs: Arb<RunSpec> = fc.oneof(
  { arbitrary: spec(0, fc.integer({ min: 0, max: 8 })), weight: 10 },
  { arbitrary: spec(2, fc.integer({ min: 1, max: 8 })), weight: 10 },
  { arbitrary: spec(0, fc.constantFrom(24, 40)), weight: 1 },
  { arbitrary: overBounds, weight: 1 },
  { arbitrary: atBounds, weight: 1 },
);

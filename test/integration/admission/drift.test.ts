/**
 * The Run CRD (crds/) and the predicate schemas (docs/predicates/) cannot drift apart: every field of
 * a Run that ends up in a signed predicate is linked here to where it lands, and for each link every
 * value the CRD admits (probed: lengths at and beyond the bounds, every code point class, enum
 * members, numbers at the bounds, an absent field) must validate against the predicate schema.
 * Completeness runs both ways: a new CRD field, or a new predicate field, fails until it is linked or
 * declared unrecorded/derived. CRD patterns are RE2 (Go) and predicate patterns ECMAScript; the
 * patterns are compared through a JS translation whose verdicts are checked against the real
 * kube-apiserver on the whole probe corpus.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { DEFAULT_TEMPERATURE } from '../../../src/aibom/index.ts';
import { DEFAULT_POLICY_PACK, UNVERSIONED } from '../../../src/policy/index.ts';
import { client } from './helpers.ts';

type Schema = Record<string, unknown> & {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  format?: string;
  oneOf?: Schema[];
  $ref?: string;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
};

type PredicateFile = 'step' | 'capability' | 'policy';

interface Link {
  /** Dotted path in the Run schema; `[]` is "each item". */
  readonly crd: string;
  /** JSON pointers into predicate schemas where the value is recorded. */
  readonly to: readonly (readonly [PredicateFile, string])[];
  /** What the recorder writes when the (optional) field is absent, or `''` is given. */
  readonly absent?: unknown;
  readonly empty?: unknown;
  /** CRD enum value → recorded value; values mapped to undefined are never recorded. */
  readonly map?: Record<string, string | undefined>;
  /** The recorder deduplicates the list (uniqueItems in the predicate). */
  readonly dedup?: true;
  /** Nothing is recorded while the field is absent (a step is attested once it has finished). */
  readonly recordedOnlyWhenPresent?: true;
}

const pack = (p: 'run' | 'step') => (p === 'run' ? 'spec.policyPack' : 'spec.steps[].policyPack');
const packLinks = (p: 'run' | 'step'): Link[] => [
  {
    crd: `${pack(p)}.name`,
    to: [
      ['step', '/properties/policyPack/properties/name'],
      ['policy', '/properties/pack'],
    ],
    absent: DEFAULT_POLICY_PACK,
  },
  {
    crd: `${pack(p)}.version`,
    to: [
      ['step', '/properties/policyPack/properties/version'],
      ['policy', '/properties/version'],
    ],
    absent: UNVERSIONED,
    empty: UNVERSIONED,
  },
  // policyComponents (src/aibom/policy.ts) records guardrails sorted and deduplicated.
  { crd: `${pack(p)}.guardrails`, to: [['policy', '/properties/guardrails']], absent: [], dedup: true },
  { crd: `${pack(p)}.guardrails[]`, to: [['policy', '/properties/guardrails/items']] },
];

/** Where each recorded Run field lands (src/recorder/extract.ts builds the statements). */
const LINKS: readonly Link[] = [
  {
    crd: 'spec.steps[].id',
    to: [
      ['step', '/properties/stepId'],
      ['capability', '/properties/stepId'],
    ],
  },
  { crd: 'spec.steps[].model.name', to: [['step', '/properties/model/properties/name']] },
  { crd: 'spec.steps[].model.provider', to: [['step', '/properties/model/properties/provider']] },
  { crd: 'spec.steps[].model.version', to: [['step', '/properties/model/properties/version']] },
  {
    crd: 'spec.steps[].model.temperature',
    to: [['step', '/properties/model/properties/temperature']],
    absent: DEFAULT_TEMPERATURE,
  },
  { crd: 'spec.steps[].tool.name', to: [['step', '/properties/tool/properties/name']] },
  { crd: 'spec.steps[].tool.command', to: [['step', '/properties/tool/properties/command']], absent: [] },
  { crd: 'spec.steps[].tool.command[]', to: [['step', '/properties/tool/properties/command/items']] },
  { crd: 'spec.steps[].capabilities', to: [], absent: [] },
  {
    crd: 'spec.steps[].capabilities[].scope',
    to: [['capability', '/properties/chain/items/properties/scope']],
  },
  {
    crd: 'spec.steps[].capabilities[].grantedBy',
    to: [['capability', '/properties/chain/items/properties/grantedBy']],
  },
  {
    crd: 'spec.steps[].capabilities[].approvedBy',
    to: [['capability', '/properties/chain/items/properties/approvedBy']],
    absent: null,
  },
  // chainOf (src/capability/chain.ts): delegatedFrom links come first in the chain, then the grant.
  { crd: 'spec.steps[].capabilities[].delegatedFrom', to: [], absent: [] },
  {
    crd: 'spec.steps[].capabilities[].delegatedFrom[].scope',
    to: [['capability', '/properties/chain/items/properties/scope']],
  },
  {
    crd: 'spec.steps[].capabilities[].delegatedFrom[].grantedBy',
    to: [['capability', '/properties/chain/items/properties/grantedBy']],
  },
  {
    crd: 'spec.steps[].capabilities[].delegatedFrom[].approvedBy',
    to: [['capability', '/properties/chain/items/properties/approvedBy']],
    absent: null,
  },
  ...packLinks('run'),
  ...packLinks('step'),
  { crd: 'status.steps[].id', to: [['step', '/properties/stepId']] },
  {
    crd: 'status.steps[].phase',
    to: [['step', '/properties/phase']],
    map: { Succeeded: 'succeeded', Failed: 'failed', Pending: undefined, Running: undefined },
    recordedOnlyWhenPresent: true,
  },
  // extract.ts: startedAt ?? finishedAt ?? the Run's creationTimestamp (always an RFC 3339 time).
  {
    crd: 'status.steps[].startedAt',
    to: [['step', '/properties/startedAt']],
    absent: '2025-01-01T00:00:00Z',
  },
  {
    crd: 'status.steps[].finishedAt',
    to: [['step', '/properties/finishedAt']],
    absent: '2025-01-01T00:00:00Z',
  },
];

/** CRD fields that reach no predicate as such: hashed into digests, or not recorded at all. */
const UNRECORDED = new Set([
  'spec.inputs', // metadata.input_digest (AIBOM) and the run provenance's externalParameters
  'spec.policyPack', // its fields are linked
  'spec.steps', // each step is linked field by field
  'spec.steps[]',
  'spec.steps[].inputs', // step inputDigest
  'spec.steps[].dependsOn', // metadata.dag_digest
  'spec.steps[].dependsOn[]',
  'spec.steps[].policyPack',
  'spec.steps[].model',
  'spec.steps[].tool',
  'spec.steps[].capabilities[]',
  'spec.steps[].capabilities[].delegatedFrom[]', // its fields are linked
  // The run provenance's externalParameters (the spec verbatim, no schema of its own) and the
  // AIBOM's standard views (src/aibom/views), which carry them as SPDX/CycloneDX fields.
  'spec.steps[].datasets',
  'spec.steps[].datasets[]',
  'spec.steps[].datasets[].name',
  'spec.steps[].datasets[].provider',
  'spec.steps[].datasets[].version',
  'spec.steps[].datasets[].location',
  'spec.steps[].datasets[].type',
  'spec.steps[].datasets[].sha256',
  'status.steps',
  'status.steps[]',
  'status.steps[].output', // step outputDigest
  'status.steps[].error', // step outputDigest (of {error})
  'status.steps[].outputDigest', // the pipeline's own, informational
]);

/** Predicate fields the recorder derives instead of copying from the Run. */
const DERIVED = new Set([
  'step:/properties/runId',
  'step:/properties/kind',
  'step:/properties/model', // object: its fields are linked
  'step:/properties/tool',
  'step:/properties/tool/properties/command', // linked as an array, its items too
  'step:/properties/inputDigest',
  'step:/properties/inputDigest/properties/sha256',
  'step:/properties/outputDigest',
  'step:/properties/outputDigest/properties/sha256',
  'step:/properties/policyPack',
  'capability:/properties/runId',
  'capability:/properties/index',
  'capability:/properties/chain',
  'capability:/properties/chain/items',
  // The chain's root is the signer that records it (src/capability/mint.ts rootOf), not Run data.
  'capability:/properties/root',
  'capability:/properties/root/properties/keyId',
  'capability:/properties/root/properties/algorithm',
  'capability:/properties/root/properties/authority',
  'capability:/properties/root/properties/biscuitRootKey',
  'policy:/properties/runId',
  'policy:/properties/decision',
]);

// ---------------------------------------------------------------------------------------------
// Schemas

let runSchema: Schema;
const predicates = {} as Record<PredicateFile, Schema>;

/** The Run CRD's patterns, and date-time strings the API server admits (probed below). */
const patterns: string[] = [];
let dateTimesAdmitted: string[] = [];

/**
 * RFC 3339 and near misses: Kubernetes' date-time format and the predicates' (ajv-formats) must
 * agree on whatever Kubernetes admits.
 */
const DATE_TIMES = [
  '2025-06-01T10:00:00Z',
  '2025-06-01T10:00:00.123456789Z',
  '2025-06-01T10:00:00.000+00:00',
  '2025-06-01T10:00:00+02:00',
  '2025-06-01T10:00:00-0700',
  '2025-06-01T10:00:00+0200',
  '2025-06-01T10:00:00+02',
  '2025-06-01T10:00:00',
  '2025-06-01T10:00:00z',
  '2025-06-01t10:00:00Z',
  '2025-06-01 10:00:00Z',
  '2025-06-01T10:00Z',
  '2025-06-01T10:00:00.Z',
  '2025-06-01',
  '2025-13-01T10:00:00Z',
  '2025-06-31T10:00:00Z',
  '2025-06-01T24:00:00Z',
  '2025-06-01T10:00:60Z',
  '2016-12-31T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '9999-12-31T23:59:59Z',
  '20250601T100000Z',
  'now',
  '',
];

const group = `drift-${Date.now().toString(36)}.example.com`;
const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** Which of `values` the API server admits under the throwaway CRD's property `prop`. */
async function serverAdmits(prop: string, values: readonly string[]): Promise<boolean[]> {
  try {
    await client().request({
      method: 'POST',
      path: `/apis/${group}/v1/namespaces/default/probes`,
      query: { dryRun: 'All' },
      body: { apiVersion: `${group}/v1`, kind: 'Probe', metadata: { name: 'p' }, spec: { [prop]: values } },
    });
    return values.map(() => true);
  } catch (err) {
    const causes = (err as { status?: { details?: { causes?: { field?: string }[] } } }).status?.details
      ?.causes;
    const refused = new Set(
      (causes ?? []).flatMap((c) => {
        const m = new RegExp(`^spec\\.${prop}\\[(\\d+)\\]$`).exec(c.field ?? '');
        return m ? [Number(m[1])] : [];
      }),
    );
    expect(refused.size, `${prop}: the refusal lists the refused values`).toBeGreaterThan(0);
    return values.map((_, i) => !refused.has(i));
  }
}

beforeAll(async () => {
  const docs = parseAllDocuments(await readFile(join(repoRoot, 'crds/vault.service.dev_runs.yaml'), 'utf8'));
  const crd = docs[0]!.toJS() as { spec: { versions: { schema: { openAPIV3Schema: Schema } }[] } };
  runSchema = crd.spec.versions[0]!.schema.openAPIV3Schema;
  for (const f of ['step', 'capability', 'policy'] as const) {
    predicates[f] = JSON.parse(
      await readFile(join(repoRoot, `docs/predicates/${f}.schema.json`), 'utf8'),
    ) as Schema;
  }
  const seen = new Set<string>();
  const walk = (s: Schema) => {
    if (typeof s.pattern === 'string') seen.add(s.pattern);
    for (const v of Object.values(s.properties ?? {})) walk(v);
    if (s.items) walk(s.items);
  };
  walk(runSchema);
  patterns.push(...[...seen].sort());

  // A throwaway CRD: one list of strings per pattern of the Run CRD, one of date-times.
  const properties = {
    ...Object.fromEntries(
      patterns.map((p, i) => [`p${i}`, { type: 'array', items: { type: 'string', pattern: p } }]),
    ),
    dt: { type: 'array', items: { type: 'string', format: 'date-time' } },
  };
  await client().request({
    method: 'POST',
    path: crdPath,
    body: {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `probes.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural: 'probes', singular: 'probe', kind: 'Probe', listKind: 'ProbeList' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties } } },
            },
          },
        ],
      },
    },
  });
  // Served once a list answers.
  for (let i = 0; ; i++) {
    try {
      await client().request({ method: 'GET', path: `/apis/${group}/v1/probes` });
      break;
    } catch (err) {
      if (i > 300) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const verdicts = await serverAdmits('dt', DATE_TIMES);
  dateTimesAdmitted = DATE_TIMES.filter((_, i) => verdicts[i]);
});

afterAll(async () => {
  await client()
    .request({ method: 'DELETE', path: `${crdPath}/probes.${group}` })
    .catch(() => undefined);
});

/** The CRD node at a dotted path, with its parent object and property name. */
function crdNode(path: string): { node: Schema; parent: Schema; key: string } {
  let node = runSchema;
  let parent = runSchema;
  let key = '';
  for (const part of path.split('.')) {
    const name = part.replace(/\[\]$/, '');
    parent = node;
    key = name;
    const next = node.properties?.[name];
    if (!next) throw new Error(`CRD has no field ${path}`);
    node = next;
    if (part.endsWith('[]')) {
      if (!node.items) throw new Error(`${path}: not an array`);
      parent = node;
      node = node.items;
    }
  }
  return { node, parent, key };
}

/** Resolves `#/$defs/...` references (the predicate schemas use no other kind). */
function deref(root: Schema, s: Schema): Schema {
  let cur = s;
  while (typeof cur.$ref === 'string') {
    const ref = cur.$ref;
    const { $ref: _, ...rest } = cur;
    const target = pointer(root, ref.replace(/^#/, ''));
    cur = { ...target, ...rest };
  }
  return cur;
}

function pointer(root: Schema, ptr: string): Schema {
  let cur: unknown = root;
  for (const seg of ptr.split('/').slice(1)) {
    cur = deref(root, cur as Schema)[seg.replace(/~1/g, '/').replace(/~0/g, '~')];
    if (cur === undefined) throw new Error(`no ${ptr}`);
  }
  return deref(root, cur as Schema);
}

/** The predicate node a pointer names, and whether its parent object requires it. */
function predicateNode(file: PredicateFile, ptr: string): { node: Schema; required: boolean } {
  const node = pointer(predicates[file], ptr);
  const m = /^(.*)\/properties\/([^/]+)$/.exec(ptr);
  if (!m) return { node, required: true }; // array items: present whenever the array is
  const parent = m[1] === '' ? predicates[file] : pointer(predicates[file], m[1]!);
  return { node, required: (parent.required ?? []).includes(m[2]!) };
}

// ---------------------------------------------------------------------------------------------
// RE2 → ECMAScript

const GO_SPACE = '\\t\\n\\f\\r ';

/**
 * The same language in ECMAScript (`u` flag). Go's \s is [\t\n\f\r ] where JavaScript's is
 * Unicode-wide; \x{…} is \u{…}. Anything this does not know is an error, not a guess.
 */
function re2ToJs(re2: string): RegExp {
  let out = '';
  let inClass = false;
  for (let i = 0; i < re2.length; i++) {
    const c = re2[i]!;
    if (c === '\\') {
      const n = re2[i + 1]!;
      i++;
      if (n === 's') out += inClass ? GO_SPACE : `[${GO_SPACE}]`;
      else if (n === 'x' && re2[i + 1] === '{') {
        const end = re2.indexOf('}', i);
        out += `\\u{${re2.slice(i + 2, end)}}`;
        i = end;
      } else if (n === 'x') {
        out += `\\x${re2.slice(i + 1, i + 3)}`;
        i += 2;
      } else if (n === 'p' && re2[i + 1] === '{') {
        const end = re2.indexOf('}', i);
        out += `\\p{${re2.slice(i + 2, end)}}`;
        i = end;
      } else if ('.-[]^$()?*+|{}\\/@:'.includes(n)) out += `\\${n}`;
      else throw new Error(`re2ToJs: \\${n} in ${re2}`);
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === ']') inClass = false;
    else if (c === '(' && re2[i + 1] === '?') throw new Error(`re2ToJs: flags or groups in ${re2}`);
    out += c;
  }
  return new RegExp(out, 'u');
}

// ---------------------------------------------------------------------------------------------
// Probes

const codePoints = (): number[] => {
  const cps = new Set<number>();
  for (let c = 0; c <= 0x3ff; c++) cps.add(c);
  for (let c = 0x2000; c <= 0x206f; c++) cps.add(c);
  for (let c = 0xfff0; c <= 0xffff; c++) cps.add(c);
  for (const c of [
    0x1680, 0x180e, 0x3000, 0x3001, 0x4e2d, 0xfeff, 0xd7ff, 0xe000, 0x10000, 0x1f600, 0x10fffd,
  ])
    cps.add(c);
  for (let c = 0; c <= 0x10ffff; c++) {
    // Every separator and control character there is.
    if (/[\p{Z}\p{Cc}]/u.test(String.fromCodePoint(c))) cps.add(c);
  }
  return [...cps].filter((c) => c < 0xd800 || c > 0xdfff).sort((a, b) => a - b);
};

/** Probe strings: each code point alone and inside text, special characters, and lengths. */
function stringProbes(s: Schema): string[] {
  const probes = new Set<string>(['', 'a', 'a@b', 'a:b', '@', ':', 'a b', 'x'.repeat(64)]);
  for (const c of codePoints()) {
    const ch = String.fromCodePoint(c);
    probes.add(ch);
    probes.add(`a${ch}b`);
  }
  for (const n of [s.minLength, s.maxLength].filter((n): n is number => n !== undefined)) {
    for (const len of [n - 1, n, n + 1].filter((l) => l >= 0)) {
      probes.add('a'.repeat(len));
      probes.add('😀'.repeat(len)); // one code point, two UTF-16 units
    }
  }
  return [...probes];
}

const codePointLength = (s: string): number => [...s].length;

function crdAcceptsString(s: Schema, v: string): boolean {
  if (s.minLength !== undefined && codePointLength(v) < s.minLength) return false;
  if (s.maxLength !== undefined && codePointLength(v) > s.maxLength) return false;
  if (s.pattern !== undefined && !re2ToJs(s.pattern).test(v)) return false;
  if (s.enum !== undefined && !s.enum.includes(v)) return false;
  return true;
}

// ajv and ajv-formats are CommonJS (see src/attest/schemas.ts).
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
const validators = new Map<string, ValidateFunction>();
function validatorFor(file: PredicateFile, ptr: string): ValidateFunction {
  const key = `${file}:${ptr}`;
  let v = validators.get(key);
  if (!v) {
    // The node with the $defs of its file, so nested references still resolve.
    const node = pointer(predicates[file], ptr);
    v = ajv.compile({ ...node, $defs: predicates[file].$defs ?? {} });
    validators.set(key, v);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------

describe('the Run CRD and the predicate schemas', () => {
  it('every CRD field of spec and status.steps is linked to a predicate or declared unrecorded', () => {
    const linked = new Set(LINKS.map((l) => l.crd));
    const missing: string[] = [];
    const walk = (s: Schema, path: string) => {
      if (!linked.has(path) && !UNRECORDED.has(path)) missing.push(path);
      for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, `${path}.${k}`);
      if (s.items) walk(s.items, `${path}[]`);
    };
    for (const [k, v] of Object.entries(crdNode('spec').node.properties ?? {})) walk(v, `spec.${k}`);
    walk(crdNode('status.steps').parent.properties!.steps!, 'status.steps');
    expect(missing).toEqual([]);
    for (const l of LINKS) expect(() => crdNode(l.crd), l.crd).not.toThrow();
  });

  it('every predicate field is linked to the CRD or declared derived', () => {
    const linked = new Set(LINKS.flatMap((l) => l.to.map(([f, p]) => `${f}:${p}`)));
    const missing: string[] = [];
    const walk = (file: PredicateFile, s: Schema, ptr: string) => {
      const node = deref(predicates[file], s);
      const key = `${file}:${ptr}`;
      if (ptr !== '' && !linked.has(key) && !DERIVED.has(key)) missing.push(key);
      for (const [k, v] of Object.entries(node.properties ?? {})) walk(file, v, `${ptr}/properties/${k}`);
      if (node.items) walk(file, node.items, `${ptr}/items`);
    };
    for (const f of ['step', 'capability', 'policy'] as const) walk(f, predicates[f], '');
    expect(missing).toEqual([]);
  });

  for (const link of LINKS) {
    it(`${link.crd}: everything the CRD admits validates against ${link.to.map(([f, p]) => `${f}${p}`).join(', ') || 'its records'}`, () => {
      const { node, parent, key } = crdNode(link.crd);
      const optional = link.crd.endsWith('[]') ? false : !(parent.required ?? []).includes(key);
      const failures: string[] = [];
      for (const [file, ptr] of link.to) {
        const { node: target, required } = predicateNode(file, ptr);
        const validate = validatorFor(file, ptr);
        const check = (value: unknown, why: string) => {
          if (!validate(value)) failures.push(`${file}${ptr} refuses ${why} ${JSON.stringify(value)}`);
        };
        if (optional && required && !link.recordedOnlyWhenPresent) {
          if (!('absent' in link))
            failures.push(`${file}${ptr} is required, ${link.crd} optional, no default`);
          else check(link.absent, 'the default for an absent field');
        }
        switch (node.type) {
          case 'string':
            // A CRD string must be bounded: what it admits, the records hold.
            if (node.maxLength === undefined && node.enum === undefined && node.format === undefined)
              failures.push(`${link.crd} has no maxLength`);
            if (node.format !== undefined && node.format !== target.format)
              failures.push(`format ${node.format} vs ${String(target.format)}`);
            if (node.format === 'date-time') {
              expect(dateTimesAdmitted).toContain('2025-06-01T10:00:00Z');
              for (const v of dateTimesAdmitted) check(v, 'a date-time the API server admits');
              break;
            }
            if (node.format !== undefined) failures.push(`${link.crd}: format ${node.format} is not probed`);
            if (node.enum) {
              for (const v of node.enum as string[]) {
                const mapped = link.map ? link.map[v] : v;
                if (link.map && !(v in link.map)) failures.push(`enum ${v} has no mapping`);
                if (mapped !== undefined) check(mapped, `enum ${v} as`);
              }
              break;
            }
            for (const v of stringProbes(node)) {
              if (!crdAcceptsString(node, v)) continue;
              check(v === '' && 'empty' in link ? link.empty : v, 'admitted string');
            }
            break;
          case 'number':
          case 'integer':
            for (const v of [node.minimum, node.maximum, 0, 0.5, 1, 2.5].filter((n) => n !== undefined)) {
              const n = v;
              if (node.minimum !== undefined && n < node.minimum) continue;
              if (node.maximum !== undefined && n > node.maximum) continue;
              check(n, 'admitted number');
            }
            if (node.minimum === undefined || node.maximum === undefined)
              failures.push(`${link.crd} is not bounded on both sides`);
            break;
          case 'array':
            if (node.maxItems === undefined) failures.push(`${link.crd} has no maxItems`);
            if ((node.minItems ?? 0) === 0) check([], 'an empty list');
            if (target.uniqueItems === true && node['x-kubernetes-list-type'] !== 'set' && !link.dedup)
              failures.push(`${file}${ptr} wants unique items; ${link.crd} is no set and not deduplicated`);
            break;
          default:
            failures.push(`${link.crd}: unhandled type ${String(node.type)}`);
        }
      }
      expect(failures.slice(0, 20)).toEqual([]);
    });
  }
});

describe('CRD patterns, checked on the real kube-apiserver', () => {
  it('the JS translation of each pattern gives the API server verdict on every probe', async () => {
    expect(patterns.length).toBeGreaterThanOrEqual(4);
    const probes = stringProbes({});
    for (const [i, p] of patterns.entries()) {
      const js = re2ToJs(p);
      const admitted = await serverAdmits(`p${i}`, probes);
      const disagree = probes.flatMap((v, j) =>
        js.test(v) === admitted[j]
          ? []
          : [`${JSON.stringify(v)}: server ${admitted[j] ? 'admits' : 'refuses'}`],
      );
      expect(disagree.slice(0, 10), `pattern ${p}`).toEqual([]);
    }
  });
});

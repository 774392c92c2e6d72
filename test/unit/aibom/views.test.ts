import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { AibomError } from '../../../src/aibom/index.ts';
import {
  AI_ACT_STANDARD_REF,
  buildViews,
  declarationProblems,
  evidenceRecord,
  NO_ASSERTION_LICENSE,
  NOASSERTION,
  PROVISIONS,
  serializeView,
  spdxProfileProblems,
  toCycloneDx17,
  toSpdx3,
  UNKNOWN_TIME,
  validateCycloneDx17,
  type CycloneDx17Bom,
  type Spdx3Document,
  type SpdxElement,
  type ViewInput,
} from '../../../src/aibom/views/index.ts';
import type { RunSpec } from '../../../src/crd/run.ts';
import { sha256Hex } from '../../../src/attest/index.ts';
import { madeRun, terminalRun, type MadeRun } from '../../helpers/views.ts';
import { ed25519Signer, p256Signer } from '../attest/keys.ts';
import { fixtureRun, reverseKeys } from './fixtures.ts';
import { expectGoldenJson } from './golden.ts';

const strict17 = new Validation.JsonStrictValidator(Spec.Version.v1dot7);
const signer = p256Signer();

/**
 * The fixture run's spec as admission would take it (its capability principals as `<type>:<name>`,
 * which the recorder requires), optionally with two datasets on the summarize step.
 */
function admittedFixtureSpec(): RunSpec {
  const spec = fixtureRun().spec;
  for (const step of spec.steps) {
    if (step.capabilities === undefined) continue;
    step.capabilities = step.capabilities.map((c) => ({
      scope: c.scope,
      grantedBy: `team:${c.grantedBy}`,
      ...(c.approvedBy !== undefined ? { approvedBy: `user:${c.approvedBy}` } : {}),
    }));
  }
  return spec;
}

function fixtureSpec(): RunSpec {
  const spec = admittedFixtureSpec();
  spec.steps[1]!.datasets = [
    {
      name: 'quarterly-reports',
      provider: 'finance-dwh',
      version: '2025-Q1',
      location: 'https://data.example.com/reports/2025-q1.parquet',
      type: 'structured',
      sha256: 'ab'.repeat(32),
    },
    { name: 'glossary', provider: 'finance-dwh' },
  ];
  return spec;
}

const made = (spec: RunSpec, opts: Parameters<typeof terminalRun>[1] = {}): MadeRun =>
  madeRun(terminalRun(spec, opts), signer);

/** Record id → digest, as an export bundle of the same records holds them. */
const bundleOf = (m: MadeRun): Map<string, string> => new Map(m.records.map((r) => [r.id, r.digest]));

const graphOf = (doc: Spdx3Document) => doc['@graph'];
const byType = (doc: Spdx3Document, type: string): SpdxElement[] =>
  graphOf(doc).filter((e) => e.type === type);
const relationships = (doc: Spdx3Document, type: string, from?: string) =>
  byType(doc, 'Relationship').filter(
    (r) => r.relationshipType === type && (from === undefined || r.from === from),
  );

describe('views: golden (fixture run with datasets; record digests replaced by sha256(id))', () => {
  it('matches test/fixtures/aibom/view-cyclonedx-1.7.json and view-spdx-3.0.1.json', async () => {
    const m = madeRun(
      terminalRun(fixtureSpec(), { namespace: 'team-a', name: 'quarterly-report' }),
      ed25519Signer(),
    );
    // Signatures differ per generated key; the golden files pin everything else.
    const input: ViewInput = {
      ...m.input,
      records: m.input.records.map((r) => ({ ...r, digest: `sha256:${sha256Hex(r.id)}` })),
    };
    await expectGoldenJson('view-cyclonedx-1.7.json', toCycloneDx17(input));
    await expectGoldenJson('view-spdx-3.0.1.json', toSpdx3(input));
  });
});

describe('views: the sample Run of docs/aibom.md (manifests/samples/run.yaml; digests sha256(id))', () => {
  it('matches docs/examples/aibom-views/sample-run.*.json, succeeded and failed', async () => {
    const sample = (
      parse(readFileSync(new URL('../../../manifests/samples/run.yaml', import.meta.url), 'utf8')) as {
        spec: RunSpec;
      }
    ).spec;
    const docs = new URL('../../../docs/examples/aibom-views/', import.meta.url);
    for (const [label, opts] of [
      ['succeeded', {}],
      ['failed', { phase: 'Failed', unfinished: ['post-comment'] }],
    ] as const) {
      const m = madeRun(
        terminalRun(sample, {
          namespace: 'demo',
          name: 'sample-run',
          uid: '019a7c3e-52a1-7f4b-8c2d-3e4f5a6b7c8d',
          ...opts,
        }),
        ed25519Signer(),
      );
      const input: ViewInput = {
        ...m.input,
        records: m.input.records.map((r) => ({ ...r, digest: `sha256:${sha256Hex(r.id)}` })),
      };
      await expectGoldenJson(`sample-run-${label}.cdx-1.7.json`, toCycloneDx17(input), docs);
      await expectGoldenJson(`sample-run-${label}.spdx-3.0.1.json`, toSpdx3(input), docs);
    }
  });
});

describe('views of a succeeded and a failed run', () => {
  for (const phase of ['Succeeded', 'Failed'] as const) {
    it(`${phase}: the official CycloneDX 1.7 schema (strict) and our checks accept both views`, async () => {
      const m = made(fixtureSpec(), { phase });
      const [cdx, spdx] = buildViews(m.input);
      expect(await strict17.validate(cdx!.bytes.toString('utf8'))).toBeNull();
      expect(await validateCycloneDx17(cdx!.document as CycloneDx17Bom, bundleOf(m))).toEqual([]);
      expect(spdxProfileProblems(spdx!.document)).toEqual([]);
      expect((cdx!.document as CycloneDx17Bom).formulation[0]!.workflows[0]!.properties).toContainEqual({
        name: 'vault:status',
        value: phase.toLowerCase(),
      });
    });
  }

  it('are deterministic: same bytes twice, whatever the order of the spec keys', () => {
    const m = made(fixtureSpec());
    const again = buildViews(m.input);
    const reversed = buildViews({ ...m.input, run: { ...m.input.run, spec: reverseKeys(m.input.run.spec) } });
    const first = buildViews(m.input);
    for (let i = 0; i < first.length; i++) {
      expect(again[i]!.bytes.equals(first[i]!.bytes)).toBe(true);
      expect(reversed[i]!.bytes.equals(first[i]!.bytes)).toBe(true);
      expect(first[i]!.digest).toBe(`sha256:${sha256Hex(first[i]!.bytes)}`);
      expect(serializeView(JSON.parse(first[i]!.bytes.toString('utf8'))).equals(first[i]!.bytes)).toBe(true);
    }
  });

  it('refuse records that are not the AIBOM attestation ids in order, and another run', () => {
    const m = made(fixtureSpec());
    const swapped = [...m.input.records];
    [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]!];
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return err instanceof AibomError ? err.code : String(err);
      }
      return 'no error';
    };
    expect(code(() => toCycloneDx17({ ...m.input, records: swapped }))).toBe('VIEW_INPUT_MISMATCH');
    expect(code(() => toSpdx3({ ...m.input, records: m.input.records.slice(1) }))).toBe(
      'VIEW_INPUT_MISMATCH',
    );
    expect(code(() => toSpdx3({ ...m.input, aibomDigest: 'sha256:xyz' }))).toBe('VIEW_INPUT_MISMATCH');
    const other = made({ steps: [{ id: 'a', tool: { name: 't' } }] });
    expect(code(() => toCycloneDx17({ ...m.input, run: other.input.run }))).toBe('RUN_MISMATCH');
  });
});

describe('CycloneDX 1.7 declarations: references and evidence', () => {
  it('every reference resolves to a bom-ref and every evidence digest is a record of the bundle', () => {
    const m = made(fixtureSpec(), { phase: 'Failed' });
    const doc = toCycloneDx17(m.input);
    expect(declarationProblems(doc, bundleOf(m))).toEqual([]);
    const refs = new Set<string>();
    JSON.stringify(doc, (k, v: unknown) => {
      if (k === 'bom-ref' && typeof v === 'string') refs.add(v);
      return v;
    });
    for (const c of doc.declarations.claims) {
      expect(refs).toContain(c.target);
      for (const e of c.evidence) expect(refs).toContain(e);
    }
    for (const a of doc.declarations.attestations) {
      expect(refs).toContain(a.assessor);
      for (const entry of a.map) {
        expect(refs).toContain(entry.requirement);
        for (const c of [...(entry.claims ?? []), ...(entry.counterClaims ?? [])]) expect(refs).toContain(c);
      }
    }
    const bundle = bundleOf(m);
    expect(doc.declarations.evidence).toHaveLength(m.records.length);
    for (const e of doc.declarations.evidence) {
      const named = evidenceRecord(e)!;
      expect(bundle.get(named.id)).toBe(named.digest);
    }
  });

  it('the check fails a dangling reference, an evidence digest not in the bundle, a missing record', () => {
    const m = made(fixtureSpec());
    const bundle = bundleOf(m);
    const dangling = toCycloneDx17(m.input);
    dangling.declarations.claims[0]!.evidence.push('evidence:nowhere');
    expect(declarationProblems(dangling, bundle).map((p) => p.code)).toEqual(['DANGLING_REF']);

    const forged = toCycloneDx17(m.input);
    forged.declarations.evidence[0]!.data[1]!.contents.attachment!.content = `sha256:${'0'.repeat(64)}`;
    expect(declarationProblems(forged, bundle).map((p) => p.code)).toEqual(['EVIDENCE_NOT_IN_BUNDLE']);

    const fewer = new Map(bundle);
    fewer.delete(m.records[0]!.id);
    expect(declarationProblems(toCycloneDx17(m.input), fewer).map((p) => p.code)).toEqual([
      'EVIDENCE_NOT_IN_BUNDLE',
    ]);

    const twoClaims = toCycloneDx17(m.input);
    const entry = twoClaims.declarations.attestations[0]!.map[0]!;
    entry.claims = [...(entry.claims ?? []), twoClaims.declarations.claims[1]!['bom-ref']];
    expect(declarationProblems(twoClaims).map((p) => p.code)).toEqual(['CLAIM_COUNT']);
  });

  it('a view whose evidence names no record fails, and the schema catches a bad conformance score', async () => {
    const m = made(fixtureSpec());
    const doc = toCycloneDx17(m.input);
    doc.declarations.evidence[0]!.data = [];
    expect(declarationProblems(doc).map((p) => p.code)).toEqual(['EVIDENCE_RECORD']);
    const scored = toCycloneDx17(m.input);
    scored.declarations.attestations[0]!.map[0]!.conformance.score = 1.5;
    expect(await strict17.validate(JSON.stringify(scored))).not.toBeNull();
  });
});

describe('guardrails as a standard: conformance and confidence', () => {
  const spec: RunSpec = {
    policyPack: { name: 'baseline', version: '1', guardrails: ['pii-redaction'] },
    steps: [
      { id: 'a', tool: { name: 't' } },
      { id: 'b', dependsOn: ['a'], model: { name: 'm', provider: 'p', version: '1' } },
      {
        id: 'c',
        dependsOn: ['b'],
        tool: { name: 'u' },
        policyPack: { name: 'egress', version: '2', guardrails: ['egress-allowlist', 'dlp'] },
      },
    ],
  };
  const mapOf = (doc: CycloneDx17Bom, pack: string) =>
    doc.declarations.attestations.find((a) => a.summary.includes(`policy pack ${pack}`))!.map;

  it('all governed steps recorded: claimed, conformance 1, confidence 0 (declared, not observed)', () => {
    const doc = toCycloneDx17(made(spec).input);
    const [entry] = mapOf(doc, 'baseline@1');
    expect(entry!.claims).toHaveLength(1);
    expect(entry!.counterClaims).toBeUndefined();
    expect(entry!.conformance.score).toBe(1);
    expect(entry!.confidence.score).toBe(0);
    expect(entry!.confidence.rationale).toMatch(/not enforced/);
    const claim = doc.declarations.claims.find((c) => c['bom-ref'] === entry!.claims![0])!;
    expect(claim.predicate).toMatch(/^2 of 2 steps governed by policy pack baseline@1 ran under it/);
    // The policy record and the two step records under the pack.
    expect(claim.evidence).toHaveLength(3);
  });

  it('a pack none of whose steps was recorded is not exercised: a counter-claim, conformance 0', () => {
    // Failed run: step c never finished, so its pack (egress@2) governs one step with no record.
    const doc = toCycloneDx17(made(spec, { phase: 'Failed', unfinished: ['c'] }).input);
    for (const entry of mapOf(doc, 'egress@2')) {
      expect(entry.claims).toBeUndefined();
      expect(entry.counterClaims).toHaveLength(1);
      expect(entry.conformance.score).toBe(0);
      expect(entry.conformance.rationale).toMatch(/^Not exercised/);
      const claim = doc.declarations.claims.find((c) => c['bom-ref'] === entry.counterClaims![0])!;
      expect(claim.predicate).toMatch(/was not exercised/);
    }
    // The baseline steps did run.
    expect(mapOf(doc, 'baseline@1')[0]!.conformance.score).toBe(1);
  });

  it('coverage is a fraction when some governed steps have no record', () => {
    const doc = toCycloneDx17(made(spec, { phase: 'Failed', unfinished: ['b', 'c'] }).input);
    expect(mapOf(doc, 'baseline@1')[0]!.conformance.score).toBe(0.5);
  });

  it('a pack that governs no step (every step has its own) is not claimed as met', () => {
    const own: RunSpec = {
      policyPack: { name: 'baseline', version: '1', guardrails: ['g'] },
      steps: [{ id: 'a', tool: { name: 't' }, policyPack: { name: 'x', version: '1', guardrails: ['h'] } }],
    };
    const doc = toCycloneDx17(made(own).input);
    const [entry] = mapOf(doc, 'baseline@1');
    expect(entry!.counterClaims).toHaveLength(1);
    expect(entry!.conformance.score).toBe(0);
    expect(mapOf(doc, 'x@1')[0]!.conformance.score).toBe(1);
  });

  it('one requirement per guardrail and exactly one claim per requirement', () => {
    const doc = toCycloneDx17(made(spec).input);
    const egress = doc.definitions.standards.find((s) => s.name === 'egress')!;
    expect(egress.requirements.map((r) => r.identifier)).toEqual(['dlp', 'egress-allowlist']);
    expect(declarationProblems(doc)).toEqual([]);
  });
});

describe('EU AI Act evidence map', () => {
  it('maps Art. 12(1)-(2), Art. 19(1), Annex IV 2(b), 2(d), 2(g); states what it cannot know; scores nothing', () => {
    const m = made(fixtureSpec());
    const doc = toCycloneDx17(m.input);
    const standard = doc.definitions.standards.find((s) => s['bom-ref'] === AI_ACT_STANDARD_REF)!;
    expect(standard.requirements.map((r) => r.identifier)).toEqual([
      'Art. 12(1)',
      'Art. 12(2)',
      'Art. 19(1)',
      'Annex IV, point 2(b)',
      'Annex IV, point 2(d)',
      'Annex IV, point 2(g)',
    ]);
    expect(standard.description).toMatch(/supports, and does not replace, a provider's own assessment/);
    for (const r of standard.requirements) {
      expect(r.properties!.filter((p) => p.name === 'vault:cannot_know').length).toBeGreaterThan(0);
      expect(r.properties!.filter((p) => p.name === 'vault:holds')).toHaveLength(1);
    }
    const map = doc.declarations.attestations.find((a) => a.summary.startsWith('EU AI Act'))!.map;
    expect(map).toHaveLength(PROVISIONS.length);
    for (const entry of map) {
      expect(entry.conformance.score).toBeUndefined();
      expect(entry.confidence.score).toBeUndefined();
      expect(entry.conformance.rationale).toMatch(/^Not scored/);
      const claim = doc.declarations.claims.find((c) => c['bom-ref'] === entry.claims![0])!;
      expect(claim.evidence.length).toBeGreaterThan(0);
      expect(claim.reasoning).toMatch(/The vault cannot know: /);
    }
    expect(doc.declarations.affirmation.statement).toMatch(/does not replace/);
    const datasets = doc.declarations.claims.find((c) => c['bom-ref'] === 'claim:eu-ai-act:annex-iv-2d')!;
    expect(datasets.predicate).toMatch(/signs 2 dataset declarations of 1 step\./);
  });

  it('a run whose steps declare no dataset says so', () => {
    const doc = toCycloneDx17(made(admittedFixtureSpec()).input);
    const datasets = doc.declarations.claims.find((c) => c['bom-ref'] === 'claim:eu-ai-act:annex-iv-2d')!;
    expect(datasets.predicate).toMatch(/No step .* declares a dataset/);
  });
});

describe('SPDX 3.0.1 view: AI and Dataset profiles', () => {
  it('one ai_AIPackage per model step with the fields the AI profile requires, none invented', () => {
    const m = made(fixtureSpec());
    const doc = toSpdx3(m.input);
    const ai = byType(doc, 'ai_AIPackage');
    const modelSteps = m.input.bom.components.models;
    expect(ai.map((p) => p.name)).toEqual(modelSteps.map((s) => s.name));
    for (const [i, p] of ai.entries()) {
      expect(p.software_packageVersion).toBe(modelSteps[i]!.version);
      expect(p.software_primaryPurpose).toBe('model');
      expect(p.software_downloadLocation).toBe(NOASSERTION);
      expect(p.releaseTime).toBe(UNKNOWN_TIME);
      expect(p.comment).toMatch(/placeholder/);
      const org = graphOf(doc).find((e) => e.spdxId === p.suppliedBy)!;
      expect(org).toMatchObject({ type: 'Organization', name: modelSteps[i]!.provider });
      expect(relationships(doc, 'hasConcludedLicense', String(p.spdxId))).toHaveLength(1);
      expect(relationships(doc, 'hasDeclaredLicense', String(p.spdxId))[0]!.to).toEqual([
        NO_ASSERTION_LICENSE,
      ]);
    }
    expect(spdxProfileProblems(doc)).toEqual([]);
  });

  it('a dataset_DatasetPackage where a step declares a dataset, with its type or noAssertion', () => {
    const doc = toSpdx3(made(fixtureSpec()).input);
    const ds = byType(doc, 'dataset_DatasetPackage');
    expect(ds.map((d) => [d.name, d.dataset_datasetType, d.software_downloadLocation])).toEqual([
      ['quarterly-reports', ['structured'], 'https://data.example.com/reports/2025-q1.parquet'],
      ['glossary', ['noAssertion'], NOASSERTION],
    ]);
    expect(ds[0]!.verifiedUsing).toEqual([{ type: 'Hash', algorithm: 'sha256', hashValue: 'ab'.repeat(32) }]);
    expect(ds[1]!.verifiedUsing).toBeUndefined();
    const input = relationships(doc, 'hasInput');
    expect(input).toHaveLength(1);
    expect(input[0]!.to).toEqual(ds.map((d) => d.spdxId));
    const noDatasets = toSpdx3(made(admittedFixtureSpec()).input);
    expect(byType(noDatasets, 'dataset_DatasetPackage')).toEqual([]);
  });

  it('the DAG as dependsOn relationships between the step builds (unknown ids left out)', () => {
    const m = made(fixtureSpec());
    const doc = toSpdx3(m.input);
    const name = new Map(byType(doc, 'build_Build').map((b) => [b.spdxId, b.name]));
    const edges = relationships(doc, 'dependsOn').map((r) => [
      name.get(r.from),
      (r.to as string[]).map((t) => name.get(t)),
    ]);
    expect(edges).toEqual([
      ['summarize', ['extract']],
      ['classify', ['extract']],
      ['scan', ['classify', 'summarize']],
    ]);
  });

  it('the profile check fails what tools-java does not check', () => {
    const doc = toSpdx3(made(fixtureSpec()).input);
    const codes = (d: Spdx3Document) => spdxProfileProblems(d).map((p) => p.code);
    const without = structuredClone(doc);
    delete byType(without, 'ai_AIPackage')[0]!.releaseTime;
    expect(codes(without)).toEqual(['PROFILE_REQUIRED']);
    const noType = structuredClone(doc);
    byType(noType, 'dataset_DatasetPackage')[0]!.dataset_datasetType = [];
    expect(codes(noType)).toEqual(['PROFILE_REQUIRED']);
    const twice = structuredClone(doc);
    const concluded = relationships(twice, 'hasConcludedLicense')[0]!;
    twice['@graph'].push({ ...concluded, spdxId: `${String(concluded.spdxId)}-2` });
    expect(codes(twice)).toEqual(['PROFILE_LICENSES']);
    const dangling = structuredClone(doc);
    relationships(dangling, 'dependsOn')[0]!.to = ['urn:nowhere:x'];
    expect(codes(dangling)).toEqual(['DANGLING_ELEMENT']);
    const millis = structuredClone(doc);
    byType(millis, 'ai_AIPackage')[0]!.releaseTime = '2025-01-01T00:00:00.000Z';
    expect(codes(millis)).toEqual(['DATETIME']);
  });

  it('created is the run end its provenance states, at SPDX resolution', () => {
    const doc = toSpdx3(made(fixtureSpec()).input);
    expect(graphOf(doc)[0]).toMatchObject({ type: 'CreationInfo', created: '2025-05-14T09:00:03Z' });
  });
});

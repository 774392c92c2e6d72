import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { describe, expect, it } from 'vitest';
import {
  AibomError,
  assertValidCycloneDx,
  buildAibom,
  prettyCycloneDx,
  toCycloneDx,
  validateCycloneDx,
  type Aibom,
  type CycloneDxBom,
} from '../../../src/aibom/index.ts';
import { fixtureInput, RUN_ID } from './fixtures.ts';
import { expectGoldenJson } from './golden.ts';

const strict = new Validation.JsonStrictValidator(Spec.Version.v1dot5);

function fixtureView(): { bom: Aibom; view: CycloneDxBom } {
  const input = fixtureInput();
  const bom = buildAibom(input);
  return { bom, view: toCycloneDx(bom, { run: input.run }) };
}

const codes = async (doc: CycloneDxBom): Promise<string[]> =>
  (await validateCycloneDx(doc)).map((p) => p.code);

describe('toCycloneDx: golden', () => {
  it('matches test/fixtures/aibom/cyclonedx.json', async () => {
    await expectGoldenJson('cyclonedx.json', fixtureView().view);
  });
});

describe('toCycloneDx: passes the official CycloneDX 1.5 JSON schema (strict)', () => {
  it('validates with and without the run, with and without a timestamp', async () => {
    const { bom, view } = fixtureView();
    expect(await strict.validate(JSON.stringify(view))).toBeNull();
    expect(await strict.validate(prettyCycloneDx(view))).toBeNull();
    const bare = toCycloneDx(bom);
    expect(await strict.validate(JSON.stringify(bare))).toBeNull();
    const stamped = toCycloneDx(bom, { timestamp: '2025-01-15T10:05:30Z' });
    expect(stamped.metadata.timestamp).toBe('2025-01-15T10:05:30Z');
    expect(await strict.validate(JSON.stringify(stamped))).toBeNull();
    for (const doc of [view, bare, stamped]) expect(await validateCycloneDx(doc)).toEqual([]);
    await expect(assertValidCycloneDx(view)).resolves.toBeUndefined();
  });

  it('fails a broken view, so the check can fail', async () => {
    const { view } = fixtureView();
    const broken = structuredClone(view);
    broken.components[0]!.hashes![0]!.content = 'abc';
    expect(await strict.validate(JSON.stringify(broken))).not.toBeNull();
    const problems = await validateCycloneDx(broken);
    expect(problems.map((p) => p.code)).toContain('SCHEMA');
    expect(problems.find((p) => p.code === 'SCHEMA')?.path).toBe('/components/0/hashes/0/content');
    await expect(assertValidCycloneDx(broken)).rejects.toSatisfy(
      (e) => e instanceof AibomError && e.code === 'CYCLONEDX_INVALID',
    );
    const badType = structuredClone(view) as unknown as { components: { type: string }[] };
    badType.components[0]!.type = 'model';
    expect(await strict.validate(JSON.stringify(badType))).not.toBeNull();
    const badSerial = { ...view, serialNumber: 'urn:uuid:not-a-uuid' };
    expect(await strict.validate(JSON.stringify(badSerial))).not.toBeNull();
  });

  it('catches what the schema lets through: SHA-256 of the wrong length, duplicate and dangling refs', async () => {
    const { view } = fixtureView();
    const sha1Length = structuredClone(view);
    sha1Length.components[0]!.hashes![0]!.content = 'a'.repeat(40);
    expect(await strict.validate(JSON.stringify(sha1Length))).toBeNull();
    expect(await codes(sha1Length)).toEqual(['HASH_LENGTH']);

    const duplicate = structuredClone(view);
    duplicate.components[1]!['bom-ref'] = duplicate.components[0]!['bom-ref']!;
    expect(await strict.validate(JSON.stringify(duplicate))).toBeNull();
    expect(await codes(duplicate)).toContain('DUPLICATE_BOM_REF');

    const dangling = structuredClone(view);
    dangling.dependencies[1]!.dependsOn = ['step:nowhere'];
    expect(await codes(dangling)).toEqual(['DANGLING_REF']);

    const twice = structuredClone(view);
    twice.dependencies.push({ ref: twice.dependencies[1]!.ref });
    expect(await codes(twice)).toEqual(['DUPLICATE_DEPENDENCY']);

    const url = structuredClone(view);
    url.externalReferences[0]!.url = 'urn:uuid:nope';
    expect(await codes(url)).toEqual(['ATTESTATION_URL']);
  });
});

describe('toCycloneDx: mapping', () => {
  it('carries every payload value', () => {
    const { bom, view } = fixtureView();
    expect(view).toMatchObject({
      bomFormat: 'CycloneDX',
      specVersion: '1.5',
      version: 1,
      serialNumber: bom.serial_number,
    });
    expect(view.metadata.component).toEqual({
      type: 'application',
      'bom-ref': `run:${RUN_ID}`,
      name: 'team-a/quarterly-report',
    });
    const props = Object.fromEntries(
      view.metadata.properties.filter((p) => p.name !== 'vault:trust_subject').map((p) => [p.name, p.value]),
    );
    expect(props).toEqual({
      'vault:run_id': bom.metadata.run_id,
      'vault:status': bom.metadata.status,
      'vault:policy_pack': bom.metadata.policy_pack,
      'vault:policy_pack_version': bom.metadata.policy_pack_version,
      'vault:dag_digest': bom.metadata.dag_digest,
      'vault:input_digest': bom.metadata.input_digest,
    });
    expect(
      view.metadata.properties.filter((p) => p.name === 'vault:trust_subject').map((p) => p.value),
    ).toEqual(bom.trust.subjects);
    expect(view.externalReferences).toEqual(
      bom.trust.attestation_ids.map((id) => ({ type: 'attestation', url: `urn:uuid:${id}` })),
    );

    const [summarize, classify, extract, scan, baseline, strictPack] = view.components;
    expect(summarize).toMatchObject({
      type: 'machine-learning-model',
      'bom-ref': `step:${RUN_ID}:summarize`,
      name: 'gpt-4o',
      version: '2024-08-06',
      publisher: 'openai',
      supplier: { name: 'openai' },
      hashes: [{ alg: 'SHA-256', content: bom.components.models[0]!.digests[0]!.content }],
    });
    expect(summarize!.modelCard!.properties).toEqual([
      { name: 'vault:temperature', value: '0.2' },
      { name: 'vault:temperature_defaulted', value: 'false' },
    ]);
    expect(classify!.modelCard!.properties).toContainEqual({
      name: 'vault:temperature_defaulted',
      value: 'true',
    });
    expect(extract).toMatchObject({ type: 'application', name: 'pdftotext' });
    expect(extract!.properties).toContainEqual({
      name: 'vault:command',
      value: '["pdftotext","-layout","report.pdf","-"]',
    });
    expect(scan!.properties).toContainEqual({ name: 'vault:command', value: '[]' });
    expect(baseline).toMatchObject({
      type: 'data',
      'bom-ref': 'policy:baseline@1.4.0',
      name: 'baseline',
      version: '1.4.0',
    });
    expect(strictPack!.data![0]!.contents.properties.map((p) => p.value)).toEqual([
      'no-external-egress',
      'pii-redaction',
    ]);
  });

  it('states the DAG as dependencies when the run is given', () => {
    const { bom, view } = fixtureView();
    const deps = Object.fromEntries(view.dependencies.map((d) => [d.ref, d.dependsOn]));
    expect(deps[`step:${RUN_ID}:scan`]).toEqual([`step:${RUN_ID}:classify`, `step:${RUN_ID}:summarize`]);
    expect(deps[`step:${RUN_ID}:extract`]).toEqual([]);
    expect(deps[`run:${RUN_ID}`]).toHaveLength(6);
    expect(toCycloneDx(bom).dependencies).toEqual([view.dependencies[0]]);
  });

  it('leaves dependencies on unknown steps out, and still validates', async () => {
    const input = fixtureInput();
    input.run.spec.steps[0]!.dependsOn = ['ghost'];
    const view = toCycloneDx(buildAibom(input), { run: input.run });
    expect(view.dependencies.find((d) => d.ref.endsWith(':extract'))?.dependsOn).toEqual([]);
    expect(await validateCycloneDx(view)).toEqual([]);
  });

  it('marks the steps that never ran (vault:step_not_run) and depends only on components, and still validates', async () => {
    const input = { ...fixtureInput(), ranSteps: ['extract', 'summarize', 'scan'] };
    input.run.phase = 'Failed';
    const view = toCycloneDx(buildAibom(input), { run: input.run });
    const notRun = view.metadata.properties
      .filter((p) => p.name === 'vault:step_not_run')
      .map((p) => p.value);
    expect(notRun).toEqual(['classify']);
    expect(view.components.some((c) => c['bom-ref']?.endsWith(':classify'))).toBe(false);
    // scan depends on summarize and classify; classify is no component, so only summarize is named.
    expect(view.dependencies.find((d) => d.ref.endsWith(':scan'))?.dependsOn).toEqual([
      `step:${RUN_ID}:summarize`,
    ]);
    expect(await validateCycloneDx(view)).toEqual([]);
    expect(fixtureView().view.metadata.properties.some((p) => p.name === 'vault:step_not_run')).toBe(false);
  });

  it('refuses a run other than the one the BOM describes', () => {
    const input = fixtureInput();
    const bom = buildAibom(input);
    const other = { ...input.run, id: '0190f3a0-0000-7000-8000-000000000000' };
    expect(() => toCycloneDx(bom, { run: other })).toThrow(expect.objectContaining({ code: 'RUN_MISMATCH' }));
    const rewired = structuredClone(input.run);
    rewired.spec.steps[3]!.dependsOn = [];
    expect(() => toCycloneDx(bom, { run: rewired })).toThrow(
      expect.objectContaining({ code: 'RUN_MISMATCH' }),
    );
    expect(() => toCycloneDx(bom, { run: { ...input.run, id: input.run.id.toUpperCase() } })).not.toThrow();
  });

  it('is deterministic without a timestamp', () => {
    expect(prettyCycloneDx(fixtureView().view)).toBe(prettyCycloneDx(fixtureView().view));
  });
});

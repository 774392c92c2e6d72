import { subjectNames } from '../attest/index.ts';
import { dagDigest } from './build.ts';
import { AibomError } from './errors.ts';
import type { Aibom, AibomDigest, AibomModel, AibomPolicy, AibomRun, AibomTool } from './types.ts';

/** Namespace of every property name the view adds (CycloneDX property taxonomy style: `ns:name`). */
export const PROPERTY_NAMESPACE = 'vault';
export const CYCLONEDX_SCHEMA_URL = 'http://cyclonedx.org/schema/bom-1.5.schema.json';
/** `metadata.tools`: the generator, without a version so that releases do not change the bytes. */
export const GENERATOR_NAME = 'aibom-vault';

export interface CdxProperty {
  name: string;
  value: string;
}

export interface CdxHash {
  alg: 'SHA-256';
  content: string;
}

export interface CdxComponent {
  type: 'application' | 'machine-learning-model' | 'data';
  'bom-ref'?: string;
  supplier?: { name: string };
  publisher?: string;
  name: string;
  version?: string;
  hashes?: CdxHash[];
  purl?: string;
  modelCard?: {
    modelParameters?: { inputs?: { format: string }[] };
    properties?: CdxProperty[];
  };
  data?: { type: 'configuration'; name: string; contents: { properties: CdxProperty[] } }[];
  properties?: CdxProperty[];
}

export interface CdxDependency {
  ref: string;
  dependsOn?: string[];
}

/** The strict CycloneDX 1.5 JSON view, as toCycloneDx emits it (a subset of the 1.5 schema). */
export interface CycloneDxBom {
  $schema: typeof CYCLONEDX_SCHEMA_URL;
  bomFormat: 'CycloneDX';
  specVersion: '1.5';
  serialNumber: string;
  version: 1;
  metadata: {
    timestamp?: string;
    tools: { components: CdxComponent[] };
    component: CdxComponent;
    properties: CdxProperty[];
  };
  components: CdxComponent[];
  externalReferences: { type: 'attestation'; url: string }[];
  dependencies: CdxDependency[];
}

export interface CycloneDxOptions {
  /**
   * The run the BOM was built from. Adds what the payload does not carry: the step dependencies
   * (from its DAG), the component name `<namespace>/<name>` and, on model steps, whether the
   * temperature was defaulted. Its id and DAG digest must match the BOM (else RUN_MISMATCH).
   */
  run?: Pick<AibomRun, 'id' | 'namespace' | 'name' | 'spec'>;
  /** RFC 3339 `metadata.timestamp`; omitted by default so the view is a function of its inputs. */
  timestamp?: string;
}

const prop = (name: string, value: string): CdxProperty => ({ name: `${PROPERTY_NAMESPACE}:${name}`, value });

const seg = encodeURIComponent;

const hashes = (digests: readonly AibomDigest[]): CdxHash[] =>
  digests.map((d) => ({ alg: d.alg, content: d.content }));

/** Policy bom-refs are the policy attestation subjects; pack names and versions contain no `@`. */
const policyRef = (p: AibomPolicy): string => subjectNames.policy(p.pack, p.version);

function modelComponent(
  runId: string,
  m: AibomModel,
  temperatureDefaulted: boolean | undefined,
): CdxComponent {
  return {
    type: 'machine-learning-model',
    'bom-ref': subjectNames.step(runId, m.id),
    supplier: { name: m.provider },
    publisher: m.provider,
    name: m.name,
    version: m.version,
    hashes: hashes(m.digests),
    // The same package URL the run's SLSA provenance derives for the model (resolvedDependencies).
    purl: `pkg:generic/${seg(m.provider)}/${seg(m.name)}@${seg(m.version)}`,
    modelCard: {
      // What the vault knows of the model's interface: the step hands it a JSON object (its inputs).
      modelParameters: { inputs: [{ format: 'application/json' }] },
      properties: [
        // Numbers print as JCS / JSON.stringify print them.
        prop('temperature', JSON.stringify(m.properties.temperature)),
        ...(temperatureDefaulted !== undefined
          ? [prop('temperature_defaulted', String(temperatureDefaulted))]
          : []),
      ],
    },
    properties: [prop('step_id', m.properties.step_id), prop('policy_pack', m.properties.policy_pack)],
  };
}

function toolComponent(runId: string, t: AibomTool): CdxComponent {
  return {
    type: 'application',
    'bom-ref': subjectNames.step(runId, t.id),
    name: t.name,
    hashes: hashes(t.digests),
    purl: `pkg:generic/${seg(t.name)}`,
    // The argv as one JSON array: property order is not guaranteed to survive other tools.
    properties: [
      prop('step_id', t.properties.step_id),
      prop('command', JSON.stringify(t.properties.command)),
    ],
  };
}

function policyComponent(p: AibomPolicy): CdxComponent {
  return {
    type: 'data',
    'bom-ref': policyRef(p),
    name: p.pack,
    version: p.version,
    data: [
      {
        type: 'configuration',
        name: 'guardrails',
        contents: { properties: p.guardrails.map((g) => prop('guardrail', g)) },
      },
    ],
  };
}

/** The run is the BOM's: same id, same DAG digest; else AibomError RUN_MISMATCH (also the views' check). */
export function checkRun(bom: Aibom, run: NonNullable<CycloneDxOptions['run']>): void {
  if (run.id.toLowerCase() !== bom.metadata.run_id) {
    throw new AibomError('RUN_MISMATCH', `run ${run.id} is not the BOM's run ${bom.metadata.run_id}`);
  }
  const digest = dagDigest(run.spec);
  if (digest !== bom.metadata.dag_digest) {
    throw new AibomError(
      'RUN_MISMATCH',
      `run DAG digest ${digest} differs from the BOM's ${bom.metadata.dag_digest}`,
    );
  }
}

/**
 * The same BOM as strict CycloneDX 1.5 JSON (docs/aibom.md has the mapping). Pure; validate the
 * result with validateCycloneDx. bom-refs are the trust subjects (`run:<id>`, `step:<id>:<step>`)
 * and the policy subjects (`policy:<pack>@<version>`), so they line up with the attestations.
 */
export function toCycloneDx(bom: Aibom, opts: CycloneDxOptions = {}): CycloneDxBom {
  const { run } = opts;
  if (run !== undefined) checkRun(bom, run);
  const runId = bom.metadata.run_id;
  const runRef = subjectNames.run(runId);
  const specSteps = new Map((run?.spec.steps ?? []).map((s) => [s.id, s]));

  const components: CdxComponent[] = [
    ...bom.components.models.map((m) => {
      const step = specSteps.get(m.id);
      return modelComponent(runId, m, step === undefined ? undefined : step.model?.temperature === undefined);
    }),
    ...bom.components.tools.map((t) => toolComponent(runId, t)),
    ...bom.components.policies.map(policyComponent),
  ];
  const componentRefs = components.map((c) => c['bom-ref']).filter((r) => r !== undefined);
  const ranIds = new Set([...bom.components.models, ...bom.components.tools].map((c) => c.id));

  // Without the run the DAG is unknown: only the run's own entry is stated. With it, every step
  // that ran gets an entry (an empty `dependsOn` states "none"); ids naming no component (no step
  // of the spec, or a step that never ran) cannot be referenced and are left out here
  // (dag_digest still covers them).
  const stepDependencies: CdxDependency[] = [];
  if (run !== undefined) {
    for (const c of [...bom.components.models, ...bom.components.tools]) {
      const deps = [...new Set(specSteps.get(c.id)?.dependsOn ?? [])].filter((d) => ranIds.has(d)).sort();
      stepDependencies.push({
        ref: subjectNames.step(runId, c.id),
        dependsOn: deps.map((d) => subjectNames.step(runId, d)),
      });
    }
  }

  return {
    $schema: CYCLONEDX_SCHEMA_URL,
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    serialNumber: bom.serial_number,
    version: 1,
    metadata: {
      ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {}),
      tools: { components: [{ type: 'application', name: GENERATOR_NAME }] },
      component: {
        type: 'application',
        'bom-ref': runRef,
        name: run !== undefined ? `${run.namespace}/${run.name}` : runRef,
      },
      properties: [
        prop('run_id', runId),
        prop('status', bom.metadata.status),
        prop('policy_pack', bom.metadata.policy_pack),
        prop('policy_pack_version', bom.metadata.policy_pack_version),
        prop('dag_digest', bom.metadata.dag_digest),
        prop('input_digest', bom.metadata.input_digest),
        ...bom.trust.subjects.map((s) => prop('trust_subject', s)),
        // The steps of the spec that never ran (a Failed run that stopped early): no component.
        ...(run?.spec.steps ?? []).filter((s) => !ranIds.has(s.id)).map((s) => prop('step_not_run', s.id)),
      ],
    },
    components,
    externalReferences: bom.trust.attestation_ids.map((id) => ({
      type: 'attestation',
      url: `urn:uuid:${id}`,
    })),
    dependencies: [{ ref: runRef, dependsOn: componentRefs }, ...stepDependencies],
  };
}

/** The CLI form of the view: two-space JSON in the view's member order, trailing newline. */
export function prettyCycloneDx(doc: CycloneDxBom): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

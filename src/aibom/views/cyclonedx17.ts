import { subjectNames } from '../../attest/index.ts';
import type { DatasetSpec } from '../../crd/run.ts';
import {
  GENERATOR_NAME,
  PROPERTY_NAMESPACE,
  toCycloneDx,
  type CdxComponent,
  type CdxDependency,
  type CdxProperty,
} from '../cyclonedx.ts';
import { nameBasedUuidV8 } from '../uuid.ts';
import { aiActDeclarations } from './ai-act.ts';
import {
  ASSESSOR_REF,
  evidenceOf,
  recordLabel,
  type CdxDeclarations,
  type CdxExternalReference,
  type CdxStandard,
} from './cdxa.ts';
import { guardrailDeclarations } from './guardrails.ts';
import { checkViewInput, runTimes, stepFacts, utcTime, type ViewInput } from './input.ts';

export const CYCLONEDX_17_SCHEMA_URL = 'http://cyclonedx.org/schema/bom-1.7.schema.json';

/** A component of the 1.7 view: the 1.5 view's, plus dataset references in the model card. */
export type Cdx17Component = Omit<CdxComponent, 'modelCard' | 'data'> & {
  modelCard?: {
    modelParameters?: { inputs?: { format: string }[]; datasets?: { ref: string }[] };
    properties?: CdxProperty[];
  };
  data?: {
    type: 'configuration' | 'dataset';
    name: string;
    contents?: { url?: string; properties?: CdxProperty[] };
  }[];
};

export interface Cdx17Task {
  'bom-ref': string;
  uid: string;
  name: string;
  taskTypes: ['other'];
  resourceReferences: { ref: string }[];
  timeStart?: string;
  timeEnd?: string;
  properties: CdxProperty[];
}

export interface Cdx17Workflow extends Omit<Cdx17Task, 'resourceReferences'> {
  tasks: Cdx17Task[];
  taskDependencies: CdxDependency[];
}

/** The CycloneDX 1.7 view, as toCycloneDx17 emits it (a subset of the official 1.7 schema). */
export interface CycloneDx17Bom {
  $schema: typeof CYCLONEDX_17_SCHEMA_URL;
  bomFormat: 'CycloneDX';
  specVersion: '1.7';
  serialNumber: string;
  version: 1;
  metadata: {
    tools: { components: CdxComponent[] };
    component: CdxComponent;
    properties: CdxProperty[];
  };
  components: Cdx17Component[];
  externalReferences: CdxExternalReference[];
  dependencies: CdxDependency[];
  formulation: { 'bom-ref': string; workflows: Cdx17Workflow[] }[];
  definitions: { standards: CdxStandard[] };
  declarations: CdxDeclarations;
}

const prop = (name: string, value: string): CdxProperty => ({ name: `${PROPERTY_NAMESPACE}:${name}`, value });

/** `dataset:<run>:<step>:<index>`: datasets are listed per step, in the order it declares them. */
export const datasetRef = (runId: string, stepId: string, index: number): string =>
  `dataset:${runId}:${stepId}:${index}`;

/** The 1.7 view's serial number: a name-based UUIDv8 of the run, distinct from the AIBOM's. */
export const cyclonedx17SerialNumber = (runId: string): string =>
  `urn:uuid:${nameBasedUuidV8(`aibom-cyclonedx-1.7:${runId}`)}`;

/**
 * A location the CycloneDX schema's `iri-reference` format accepts in every validator: an RFC 3986
 * URI of ASCII characters, percent escapes well formed, at most one `#`, no `[`/`]` (IPv6 hosts
 * included: rare for datasets). The CRD admits any absolute URI without whitespace; one outside
 * this subset is stated only as the `vault:location` property, never as a malformed `url`.
 */
const SAFE_URI =
  /^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*(?:#(?:[A-Za-z0-9\-._~:/?@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)?$/;

function datasetComponent(runId: string, stepId: string, d: DatasetSpec, i: number): Cdx17Component {
  return {
    type: 'data',
    'bom-ref': datasetRef(runId, stepId, i),
    supplier: { name: d.provider },
    name: d.name,
    ...(d.version !== undefined ? { version: d.version } : {}),
    ...(d.sha256 !== undefined ? { hashes: [{ alg: 'SHA-256' as const, content: d.sha256 }] } : {}),
    data: [
      {
        type: 'dataset',
        name: d.name,
        ...(d.location !== undefined && SAFE_URI.test(d.location) ? { contents: { url: d.location } } : {}),
      },
    ],
    properties: [
      prop('step_id', stepId),
      prop('dataset_type', d.type ?? 'noAssertion'),
      ...(d.location !== undefined ? [prop('location', d.location)] : []),
    ],
  };
}

/**
 * The AIBOM as CycloneDX 1.7 (docs/aibom.md, "CycloneDX 1.7 view"): the strict 1.5 view's
 * components (models with their model cards, tools, policy packs) plus the datasets steps declare,
 * the attestations it lists with their record digests, the step DAG as `formulation`, and
 * CycloneDX Attestations: the policy packs' guardrails and an EU AI Act evidence map as standards,
 * one claim per requirement for this run, evidence naming the records that support it. Pure and
 * deterministic (no wall-clock time: times are those the records state). Throws AibomError
 * RUN_MISMATCH / VIEW_INPUT_MISMATCH for inputs that do not describe one AIBOM.
 */
export function toCycloneDx17(input: ViewInput): CycloneDx17Bom {
  checkViewInput(input);
  const { run, bom, records } = input;
  const base = toCycloneDx(bom, { run });
  const runId = bom.metadata.run_id;
  const runRef = subjectNames.run(runId);
  const steps = run.spec.steps;

  const datasetsOf = new Map(
    steps.map((s) => [s.id, (s.datasets ?? []).map((d, i) => datasetComponent(runId, s.id, d, i))]),
  );
  const datasetRefsOf = (stepId: string): string[] =>
    (datasetsOf.get(stepId) ?? []).map((c) => c['bom-ref']).filter((r) => r !== undefined);
  const stepComponents: Cdx17Component[] = [];
  const policyComponents: Cdx17Component[] = [];
  for (const c of base.components) {
    if (c.type === 'data') {
      policyComponents.push(c);
      continue;
    }
    const stepId = c.properties?.find((p) => p.name === `${PROPERTY_NAMESPACE}:step_id`)?.value ?? '';
    const datasets = datasetRefsOf(stepId);
    stepComponents.push(
      c.modelCard !== undefined && datasets.length > 0
        ? {
            ...c,
            modelCard: {
              ...c.modelCard,
              modelParameters: { ...c.modelCard.modelParameters, datasets: datasets.map((ref) => ({ ref })) },
            },
          }
        : c,
    );
  }
  const datasetComponents = steps.flatMap((s) => datasetsOf.get(s.id) ?? []);
  const components = [...stepComponents, ...datasetComponents, ...policyComponents];

  // The 1.5 view's graph (the run depends on every component, each step on the steps it needs),
  // with the datasets: the run depends on them too, a step on the datasets it reads.
  const allDatasetRefs = datasetComponents.map((c) => c['bom-ref']).filter((r) => r !== undefined);
  const dependencies: CdxDependency[] = [
    ...base.dependencies.map((d) => {
      if (d.ref === runRef) return { ref: d.ref, dependsOn: [...(d.dependsOn ?? []), ...allDatasetRefs] };
      const stepId = steps.find((s) => subjectNames.step(runId, s.id) === d.ref)?.id;
      const datasets = stepId !== undefined ? datasetRefsOf(stepId) : [];
      return datasets.length > 0 ? { ref: d.ref, dependsOn: [...(d.dependsOn ?? []), ...datasets] } : d;
    }),
    ...allDatasetRefs.map((ref) => ({ ref, dependsOn: [] })),
  ];

  const times = records.map(runTimes).find((t) => t !== undefined);
  const stepRecord = new Map(
    records.flatMap((r) => {
      const f = stepFacts(r);
      return f !== undefined && r.stepId !== null ? [[r.stepId, { record: r, facts: f }] as const] : [];
    }),
  );
  const taskRef = (stepId: string) => `task:${runId}:${stepId}`;
  const known = new Set(steps.map((s) => s.id));
  const tasks: Cdx17Task[] = steps.map((s) => {
    const rec = stepRecord.get(s.id);
    const start = rec !== undefined ? utcTime(rec.facts.startedAt) : undefined;
    const end = rec !== undefined ? utcTime(rec.facts.finishedAt) : undefined;
    return {
      'bom-ref': taskRef(s.id),
      uid: s.id,
      name: s.id,
      taskTypes: ['other'],
      resourceReferences: [
        { ref: subjectNames.step(runId, s.id) },
        ...datasetRefsOf(s.id).map((ref) => ({ ref })),
      ],
      ...(start !== undefined ? { timeStart: start } : {}),
      ...(end !== undefined ? { timeEnd: end } : {}),
      properties: [
        prop('phase', rec?.facts.phase ?? 'not recorded'),
        ...(rec !== undefined ? [prop('attestation_id', rec.record.id)] : []),
      ],
    };
  });
  const runStart = times !== undefined ? utcTime(times.startedOn) : undefined;
  const runEnd = times !== undefined ? utcTime(times.finishedOn) : undefined;
  const workflow: Cdx17Workflow = {
    'bom-ref': `workflow:${runId}`,
    uid: runId,
    name: `${run.namespace}/${run.name}`,
    taskTypes: ['other'],
    ...(runStart !== undefined ? { timeStart: runStart } : {}),
    ...(runEnd !== undefined ? { timeEnd: runEnd } : {}),
    properties: [prop('status', bom.metadata.status), prop('dag_digest', bom.metadata.dag_digest)],
    tasks,
    // Ids naming no step are left out (dag_digest still covers them), as in the 1.5 view.
    taskDependencies: steps.map((s) => ({
      ref: taskRef(s.id),
      dependsOn: [...new Set(s.dependsOn ?? [])]
        .filter((d) => known.has(d))
        .sort()
        .map(taskRef),
    })),
  };

  const guardrails = guardrailDeclarations(input, runRef);
  const aiAct = aiActDeclarations(input, runRef);

  return {
    $schema: CYCLONEDX_17_SCHEMA_URL,
    bomFormat: 'CycloneDX',
    specVersion: '1.7',
    serialNumber: cyclonedx17SerialNumber(runId),
    version: 1,
    metadata: {
      tools: { components: [{ type: 'application', name: GENERATOR_NAME }] },
      component: base.metadata.component,
      properties: [...base.metadata.properties, prop('aibom_digest', input.aibomDigest)],
    },
    components,
    externalReferences: [
      {
        type: 'bom',
        url: bom.serial_number,
        comment: 'the AIBOM payload (the spec document) this view is derived from',
        hashes: [{ alg: 'SHA-256', content: input.aibomDigest.slice('sha256:'.length) }],
      },
      ...records.map((r): CdxExternalReference => ({
        type: 'attestation',
        url: `urn:uuid:${r.id}`,
        comment: `${recordLabel(r)}; the hash is its record digest (SHA-256 of the JCS of its DSSE envelope)`,
        hashes: [{ alg: 'SHA-256', content: r.digest.slice('sha256:'.length) }],
      })),
    ],
    dependencies,
    formulation: [{ 'bom-ref': `formula:${runId}`, workflows: [workflow] }],
    definitions: { standards: [...guardrails.standards, aiAct.standard] },
    declarations: {
      assessors: [{ 'bom-ref': ASSESSOR_REF, thirdParty: false, organization: { name: GENERATOR_NAME } }],
      attestations: [...guardrails.attestations, aiAct.attestation],
      claims: [...guardrails.claims, ...aiAct.claims],
      evidence: records.map(evidenceOf),
      affirmation: {
        statement: `Generated by ${GENERATOR_NAME} from the signed records of run ${run.namespace}/${run.name} (${runId}); every claim cites the records it rests on. The EU AI Act map supports, and does not replace, a provider's own assessment.`,
      },
    },
  };
}

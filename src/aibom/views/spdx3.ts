import { PredicateTypes, RUN_BUILD_TYPE } from '../../attest/index.ts';
import { packContext, resolveStepPack } from '../../policy/index.ts';
import { GENERATOR_NAME } from '../cyclonedx.ts';
import { nameBasedUuidV8 } from '../uuid.ts';
import { recordLabel } from './cdxa.ts';
import { checkViewInput, runTimes, spdxTime, stepFacts, type ViewInput, type ViewRecord } from './input.ts';

/**
 * The AIBOM as SPDX 3.0.1 JSON-LD (docs/aibom.md, "SPDX 3.0.1 view"): the run and each step as a
 * `build_Build`, each model step's model as an `ai_AIPackage`, each tool as a `software_Package`,
 * each declared dataset as a `dataset_DatasetPackage`, the policy packs as configuration packages,
 * the step DAG as `dependsOn` relationships, and the records as external references.
 *
 * Never invented: where the run has no data for a field SPDX requires, the value says so
 * (NOASSERTION, noAssertion, NoAssertionLicense) or, for the required times no value can mark as
 * unknown, is the UNKNOWN_TIME placeholder, named in the element's comment. Pure and deterministic.
 */

export const SPDX_CONTEXT = 'https://spdx.org/rdf/3.0.1/spdx-context.jsonld';
export const SPDX_SPEC_VERSION = '3.0.1';

/**
 * `releaseTime` (AIPackage, DatasetPackage) and `builtTime` (DatasetPackage) are required by the AI
 * and Dataset profiles, and SPDX has no "unknown" value for a DateTime. The run never says when a
 * model or dataset was released or built, so they carry this instant, the Unix epoch, and the
 * element's comment says it is a placeholder. It is not a date the vault knows.
 */
export const UNKNOWN_TIME = '1970-01-01T00:00:00Z';
/** `software_downloadLocation` where the run does not say where to obtain the package. */
export const NOASSERTION = 'NOASSERTION';
/** The AnyLicenseInfo for "no assertion can be made" (ExpandedLicensing individual). */
export const NO_ASSERTION_LICENSE = 'expandedlicensing_NoAssertionLicense';

/** Media type of a DSSE envelope, for the external references to records. */
const DSSE_MEDIA_TYPE = 'application/vnd.dsse.envelope.v1+json';

export type SpdxElement = Record<string, unknown> & { type: string };

export interface Spdx3Document {
  '@context': typeof SPDX_CONTEXT;
  '@graph': SpdxElement[];
}

/** The base of every spdxId of a run's view (element ids are IRIs under it). */
export const spdxNamespace = (runId: string): string =>
  `urn:uuid:${nameBasedUuidV8(`aibom-spdx-3.0.1:${runId}`)}#`;

const CREATION_INFO = '_:creationinfo';

const ids = (runId: string) => {
  const base = spdxNamespace(runId);
  // Step ids are [a-z0-9-_.]; free text (providers, packs) is percent-encoded.
  const seg = encodeURIComponent;
  return {
    document: `${base}document`,
    creator: `${base}agent/aibom-vault`,
    run: `${base}run`,
    step: (s: string) => `${base}step/${s}`,
    model: (s: string) => `${base}step/${s}/model`,
    tool: (s: string) => `${base}step/${s}/tool`,
    dataset: (s: string, i: number) => `${base}step/${s}/dataset/${i}`,
    org: (name: string) => `${base}organization/${seg(name)}`,
    policy: (pack: string, version: string) => `${base}policy/${seg(pack)}@${seg(version)}`,
    rel: (name: string) => `${base}relationship/${name}`,
  };
};

const relationship = (
  id: string,
  from: string,
  relationshipType: string,
  to: string[],
  extra: Record<string, unknown> = {},
): SpdxElement => ({
  type: 'Relationship',
  spdxId: id,
  creationInfo: CREATION_INFO,
  from,
  relationshipType,
  to,
  ...extra,
});

const recordRef = (r: ViewRecord) => ({
  type: 'ExternalRef',
  externalRefType: 'other',
  contentType: DSSE_MEDIA_TYPE,
  locator: [`urn:uuid:${r.id}`],
  comment: `${recordLabel(r)}; record digest ${r.digest} (SHA-256 of the JCS of the DSSE envelope)`,
});

const entry = (key: string, value: string) => ({ type: 'DictionaryEntry', key, value });

/**
 * What the elements of one view are collected into, in document order: each list is appended to
 * as the steps and packs are walked, and organisations are created on first mention.
 */
interface Graph {
  readonly id: ReturnType<typeof ids>;
  readonly runId: string;
  readonly organizations: Map<string, SpdxElement>;
  readonly stepBuilds: SpdxElement[];
  readonly packages: SpdxElement[];
  readonly relationships: SpdxElement[];
}

/** The Organization element named `name` (created on first mention), by id. */
function orgOf(g: Graph, name: string): string {
  const orgId = g.id.org(name);
  if (!g.organizations.has(orgId)) {
    g.organizations.set(orgId, { type: 'Organization', spdxId: orgId, creationInfo: CREATION_INFO, name });
  }
  return orgId;
}

/** The AI and Dataset profiles want exactly one of each per package; the run states no licence. */
function licences(g: Graph, from: string, name: string): void {
  g.relationships.push(
    relationship(g.id.rel(`${name}/concluded-license`), from, 'hasConcludedLicense', [NO_ASSERTION_LICENSE]),
    relationship(g.id.rel(`${name}/declared-license`), from, 'hasDeclaredLicense', [NO_ASSERTION_LICENSE]),
  );
}

type Step = ViewInput['run']['spec']['steps'][number];
type BomModel = ViewInput['bom']['components']['models'][number];
type BomTool = ViewInput['bom']['components']['tools'][number];
type StepRecord = { record: ViewRecord; facts: NonNullable<ReturnType<typeof stepFacts>> };

/** A step as a `build_Build`: its times, inputs digest, temperature and phase, and its record. */
function stepBuild(
  g: Graph,
  step: Step,
  rec: StepRecord | undefined,
  model?: BomModel,
  tool?: BomTool,
): SpdxElement {
  const stepStart = rec !== undefined ? spdxTime(rec.facts.startedAt) : undefined;
  const stepEnd = rec !== undefined ? spdxTime(rec.facts.finishedAt) : undefined;
  const digest = (model ?? tool)?.digests[0]?.content;
  return {
    type: 'build_Build',
    spdxId: g.id.step(step.id),
    creationInfo: CREATION_INFO,
    name: step.id,
    build_buildType: PredicateTypes.step,
    build_buildId: `${g.runId}:${step.id}`,
    ...(stepStart !== undefined ? { build_buildStartTime: stepStart } : {}),
    ...(stepEnd !== undefined ? { build_buildEndTime: stepEnd } : {}),
    build_parameter: [
      ...(digest !== undefined ? [entry('inputs.sha256', digest)] : []),
      ...(model !== undefined ? [entry('temperature', JSON.stringify(model.properties.temperature))] : []),
      entry('phase', rec?.facts.phase ?? 'not recorded'),
    ],
    ...(rec !== undefined ? { externalRef: [recordRef(rec.record)] } : {}),
  };
}

/** The model or tool a step used, as a package, and the step's `usesTool` relationship to it. */
function usedPackage(g: Graph, step: Step, model?: BomModel, tool?: BomTool): void {
  let usedId: string | undefined;
  if (model !== undefined) {
    usedId = g.id.model(step.id);
    g.packages.push({
      type: 'ai_AIPackage',
      spdxId: usedId,
      creationInfo: CREATION_INFO,
      name: model.name,
      software_packageVersion: model.version,
      software_packageUrl: `pkg:generic/${encodeURIComponent(model.provider)}/${encodeURIComponent(model.name)}@${encodeURIComponent(model.version)}`,
      software_downloadLocation: NOASSERTION,
      software_primaryPurpose: 'model',
      suppliedBy: orgOf(g, model.provider),
      releaseTime: UNKNOWN_TIME,
      comment: `The model step ${step.id} called. releaseTime ${UNKNOWN_TIME} is a placeholder the AI profile requires: the run does not say when the model was released. downloadLocation and licences: no assertion (the run does not say).`,
    });
    licences(g, usedId, `step/${step.id}/model`);
  } else if (tool !== undefined) {
    usedId = g.id.tool(step.id);
    g.packages.push({
      type: 'software_Package',
      spdxId: usedId,
      creationInfo: CREATION_INFO,
      name: tool.name,
      software_packageUrl: `pkg:generic/${encodeURIComponent(tool.name)}`,
      software_primaryPurpose: 'application',
      comment: `The tool step ${step.id} ran, command line ${JSON.stringify(tool.properties.command)}.`,
    });
  }
  if (usedId !== undefined) {
    g.relationships.push(
      relationship(g.id.rel(`step/${step.id}/uses`), g.id.step(step.id), 'usesTool', [usedId]),
    );
  }
}

/** The datasets a step declares, as packages, and the step's `hasInput` relationship to them. */
function datasetPackages(g: Graph, step: Step): void {
  const datasetIds: string[] = [];
  (step.datasets ?? []).forEach((d, i) => {
    const dsId = g.id.dataset(step.id, i);
    datasetIds.push(dsId);
    g.packages.push({
      type: 'dataset_DatasetPackage',
      spdxId: dsId,
      creationInfo: CREATION_INFO,
      name: d.name,
      ...(d.version !== undefined ? { software_packageVersion: d.version } : {}),
      software_downloadLocation: d.location ?? NOASSERTION,
      software_primaryPurpose: 'data',
      originatedBy: [orgOf(g, d.provider)],
      releaseTime: UNKNOWN_TIME,
      builtTime: UNKNOWN_TIME,
      dataset_datasetType: [d.type ?? 'noAssertion'],
      ...(d.sha256 !== undefined
        ? { verifiedUsing: [{ type: 'Hash', algorithm: 'sha256', hashValue: d.sha256 }] }
        : {}),
      comment: `A dataset step ${step.id} declares. releaseTime and builtTime ${UNKNOWN_TIME} are placeholders the Dataset profile requires: the run does not say when it was released or built.${d.location === undefined ? ' downloadLocation: no assertion (the run gives no location).' : ''}`,
    });
    licences(g, dsId, `step/${step.id}/dataset/${i}`);
  });
  if (datasetIds.length > 0) {
    g.relationships.push(
      relationship(g.id.rel(`step/${step.id}/inputs`), g.id.step(step.id), 'hasInput', datasetIds),
    );
  }
}

/** Every step: its build, what it used, its datasets and its `dependsOn` edges, step by step. */
function stepElements(g: Graph, input: ViewInput): void {
  const { run, bom, records } = input;
  const stepRecords = new Map(
    records.flatMap((r) => {
      const f = stepFacts(r);
      return f !== undefined && r.stepId !== null ? [[r.stepId, { record: r, facts: f }] as const] : [];
    }),
  );
  const models = new Map(bom.components.models.map((m) => [m.id, m]));
  const tools = new Map(bom.components.tools.map((t) => [t.id, t]));
  const known = new Set(run.spec.steps.map((s) => s.id));
  for (const step of run.spec.steps) {
    const model = models.get(step.id);
    const tool = tools.get(step.id);
    g.stepBuilds.push(stepBuild(g, step, stepRecords.get(step.id), model, tool));
    usedPackage(g, step, model, tool);
    datasetPackages(g, step);
    const deps = [...new Set(step.dependsOn ?? [])].filter((d) => known.has(d)).sort();
    if (deps.length > 0) {
      g.relationships.push(
        relationship(
          g.id.rel(`step/${step.id}/depends-on`),
          g.id.step(step.id),
          'dependsOn',
          deps.map(g.id.step),
        ),
      );
    }
  }
}

/** Policy packs configure the steps they govern (the resolution the step records are signed with). */
function policyElements(g: Graph, input: ViewInput): void {
  const { run, bom } = input;
  // The step packs as the recorder resolved them when it signed the step records (no override: a
  // view is of the stored AIBOM).
  const packs = packContext(run.spec);
  for (const p of bom.components.policies) {
    const pid = g.id.policy(p.pack, p.version);
    g.packages.push({
      type: 'software_Package',
      spdxId: pid,
      creationInfo: CREATION_INFO,
      name: p.pack,
      software_packageVersion: p.version,
      software_primaryPurpose: 'configuration',
      description: `Policy pack ${p.pack}@${p.version}; guardrails declared: ${p.guardrails.length === 0 ? 'none' : JSON.stringify(p.guardrails)}.`,
    });
    const governed = run.spec.steps
      .filter((s) => {
        const r = resolveStepPack(s, packs);
        return r.name === p.pack && r.version === p.version;
      })
      .map((s) => g.id.step(s.id));
    if (governed.length > 0) {
      g.relationships.push(
        relationship(
          g.id.rel(`policy/${encodeURIComponent(p.pack)}@${encodeURIComponent(p.version)}/configures`),
          pid,
          'configures',
          governed,
        ),
      );
    }
  }
}

/** The run as the root `build_Build`: its times, digests, the AIBOM payload and its run-level records. */
function runBuildOf(g: Graph, input: ViewInput, started?: string, finished?: string): SpdxElement {
  const { run, bom, records } = input;
  const runRecord = records.find((r) => runTimes(r) !== undefined);
  return {
    type: 'build_Build',
    spdxId: g.id.run,
    creationInfo: CREATION_INFO,
    name: `${run.namespace}/${run.name}`,
    build_buildType: RUN_BUILD_TYPE,
    build_buildId: g.runId,
    ...(started !== undefined ? { build_buildStartTime: started } : {}),
    ...(finished !== undefined ? { build_buildEndTime: finished } : {}),
    build_parameter: [
      entry('status', bom.metadata.status),
      entry('dag_digest', bom.metadata.dag_digest),
      entry('input_digest', bom.metadata.input_digest),
      entry('aibom_digest', input.aibomDigest),
    ],
    externalRef: [
      {
        type: 'ExternalRef',
        externalRefType: 'other',
        contentType: 'application/json',
        locator: [bom.serial_number],
        comment: `the AIBOM payload this view is derived from, digest ${input.aibomDigest}`,
      },
      ...(runRecord !== undefined ? [recordRef(runRecord)] : []),
      ...records.filter((r) => r.kind === 'policy' || r.kind === 'capability').map(recordRef),
    ],
  };
}

export function toSpdx3(input: ViewInput): Spdx3Document {
  checkViewInput(input);
  const { run, records } = input;
  const runId = input.bom.metadata.run_id;
  const g: Graph = {
    id: ids(runId),
    runId,
    organizations: new Map(),
    stepBuilds: [],
    packages: [],
    relationships: [],
  };
  const id = g.id;
  const times = records.map(runTimes).find((t) => t !== undefined);
  const started = times !== undefined ? spdxTime(times.startedOn) : undefined;
  const finished = times !== undefined ? spdxTime(times.finishedOn) : undefined;
  stepElements(g, input);
  policyElements(g, input);
  const runBuild = runBuildOf(g, input, started, finished);
  if (g.stepBuilds.length > 0) {
    g.relationships.unshift(
      relationship(
        id.rel('run/contains'),
        id.run,
        'contains',
        g.stepBuilds.map((b) => String(b.spdxId)),
      ),
    );
  }

  const creator: SpdxElement = {
    type: 'SoftwareAgent',
    spdxId: id.creator,
    creationInfo: CREATION_INFO,
    name: GENERATOR_NAME,
  };
  const elements = [
    creator,
    ...g.organizations.values(),
    runBuild,
    ...g.stepBuilds,
    ...g.packages,
    ...g.relationships,
  ];
  const hasDatasets = run.spec.steps.some((s) => (s.datasets?.length ?? 0) > 0);
  const document: SpdxElement = {
    type: 'SpdxDocument',
    spdxId: id.document,
    creationInfo: CREATION_INFO,
    name: `AIBOM of ${run.namespace}/${run.name} (${runId})`,
    profileConformance: ['core', 'software', 'build', 'ai', ...(hasDatasets ? ['dataset'] : [])],
    rootElement: [id.run],
    element: elements.map((e) => String(e.spdxId)),
  };
  // `created`: the run's end as its provenance record states it, so the view is a function of
  // stored data; a view of a run without one (none is recorded before the AIBOM) uses UNKNOWN_TIME.
  const creationInfo: SpdxElement = {
    type: 'CreationInfo',
    '@id': CREATION_INFO,
    specVersion: SPDX_SPEC_VERSION,
    created: finished ?? UNKNOWN_TIME,
    createdBy: [id.creator],
    comment: `Derived by ${GENERATOR_NAME} from the AIBOM and the signed records of run ${runId}; created is the run's end as its provenance record states it.`,
  };
  return { '@context': SPDX_CONTEXT, '@graph': [creationInfo, document, ...elements] };
}

import { canonicalJson, jcsSha256Hex, type JsonValue } from '../json.ts';
import { PredicateTypes, subjectNames, type Statement, type Subject } from '../statement.ts';
import { buildStatement, type PolicyPackRef } from './common.ts';

/** buildType of a vault run: the external parameters are the Run custom resource's spec. */
export const RUN_BUILD_TYPE = 'https://vault.service.dev/buildtypes/run/v1';
/** builder.id: the vault controller, the only component that produces run provenance. */
export const CONTROLLER_BUILDER_ID = 'https://vault.service.dev/controller';

/** SLSA v1 ResourceDescriptor (at least one of uri, digest, content). */
export interface ResourceDescriptor {
  uri?: string;
  digest?: Record<string, string>;
  name?: string;
  downloadLocation?: string;
  mediaType?: string;
  content?: string;
  annotations?: { [key: string]: JsonValue };
}

/** SLSA Provenance v1 as the vault fills it (docs/predicates/slsa-provenance-v1.schema.json). */
export interface ProvenancePredicate {
  buildDefinition: {
    buildType: typeof RUN_BUILD_TYPE;
    /** The Run spec, verbatim. */
    externalParameters: unknown;
    internalParameters?: { namespace?: string; policyPack?: PolicyPackRef };
    resolvedDependencies: ResourceDescriptor[];
  };
  runDetails: {
    builder: { id: string; version?: Record<string, string> };
    metadata: { invocationId: string; startedOn: string; finishedOn: string };
    byproducts?: ResourceDescriptor[];
  };
}

/** A model used by the run. Without `uri`, one is derived: `pkg:generic/<provider>/<name>@<version>`. */
export interface ModelDependency {
  name: string;
  provider: string;
  version: string;
  uri?: string;
  /** Hex SHA-256 of the model weights, when known (hosted models usually have none). */
  sha256?: string;
}

/** A tool used by the run. Without `uri`, one is derived: `pkg:generic/<name>[@<version>]`. */
export interface ToolDependency {
  name: string;
  version?: string;
  uri?: string;
  sha256?: string;
}

export interface RunInput {
  /** The Run UID. */
  runId: string;
  /** The Run custom resource's spec (a JSON object); becomes externalParameters. */
  spec: unknown;
  namespace?: string;
  policyPack?: PolicyPackRef;
  models: readonly ModelDependency[];
  tools: readonly ToolDependency[];
  /** RFC 3339 timestamps. */
  startedOn: string;
  finishedOn: string;
  builderId?: string;
  builderVersion?: Record<string, string>;
  byproducts?: readonly ResourceDescriptor[];
}

const seg = encodeURIComponent;

function modelDescriptor(m: ModelDependency): ResourceDescriptor {
  return {
    name: `model:${m.provider}/${m.name}`,
    uri: m.uri ?? `pkg:generic/${seg(m.provider)}/${seg(m.name)}@${seg(m.version)}`,
    ...(m.sha256 !== undefined ? { digest: { sha256: m.sha256 } } : {}),
    annotations: { kind: 'model', provider: m.provider, version: m.version },
  };
}

function toolDescriptor(t: ToolDependency): ResourceDescriptor {
  return {
    name: `tool:${t.name}`,
    uri: t.uri ?? `pkg:generic/${seg(t.name)}${t.version !== undefined ? `@${seg(t.version)}` : ''}`,
    ...(t.sha256 !== undefined ? { digest: { sha256: t.sha256 } } : {}),
    annotations: { kind: 'tool', ...(t.version !== undefined ? { version: t.version } : {}) },
  };
}

/** Keeps the first of identical descriptors: one model used by many steps is one dependency. */
function unique(descriptors: ResourceDescriptor[]): ResourceDescriptor[] {
  const seen = new Set<string>();
  return descriptors.filter((d) => {
    const key = canonicalJson(d);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Subject `run:<runId>`; its digest identifies what was asked for: SHA-256 of the JCS canonical
 * JSON of the run spec (externalParameters).
 */
export function runSubject(predicate: ProvenancePredicate): Subject {
  return {
    digest: { sha256: jcsSha256Hex(predicate.buildDefinition.externalParameters) },
    name: subjectNames.run(predicate.runDetails.metadata.invocationId),
  };
}

export function runStatement(
  input: RunInput,
): Statement<ProvenancePredicate, typeof PredicateTypes.provenance> {
  const internal = {
    ...(input.namespace !== undefined ? { namespace: input.namespace } : {}),
    ...(input.policyPack !== undefined
      ? { policyPack: { name: input.policyPack.name, version: input.policyPack.version } }
      : {}),
  };
  const predicate: ProvenancePredicate = {
    buildDefinition: {
      buildType: RUN_BUILD_TYPE,
      externalParameters: input.spec,
      ...(Object.keys(internal).length > 0 ? { internalParameters: internal } : {}),
      resolvedDependencies: unique([
        ...input.models.map(modelDescriptor),
        ...input.tools.map(toolDescriptor),
      ]),
    },
    runDetails: {
      builder: {
        id: input.builderId ?? CONTROLLER_BUILDER_ID,
        ...(input.builderVersion !== undefined ? { version: { ...input.builderVersion } } : {}),
      },
      metadata: { invocationId: input.runId, startedOn: input.startedOn, finishedOn: input.finishedOn },
      ...(input.byproducts !== undefined ? { byproducts: [...input.byproducts] } : {}),
    },
  };
  return buildStatement(PredicateTypes.provenance, predicate, runSubject);
}

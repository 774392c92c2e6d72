import type { CdxProperty } from '../cyclonedx.ts';
import {
  ASSESSOR_REF,
  evidenceRef,
  type CdxAttestation,
  type CdxClaim,
  type CdxMapEntry,
  type CdxRequirement,
  type CdxStandard,
} from './cdxa.ts';
import type { ViewInput, ViewRecord } from './input.ts';

/**
 * An evidence map for Regulation (EU) 2024/1689 (the AI Act), as a CDXA standard: for a few
 * provisions on logs and technical documentation, what the vault holds for one run (a claim citing
 * the records) and what it cannot know (stated, never claimed). Nothing here is scored: whether an
 * AI system conforms is the provider's assessment, which this map supports and does not replace.
 * Requirement texts are paraphrases, not the Official Journal's wording (see its externalReference).
 */

export const AI_ACT_STANDARD_REF = 'standard:eu-ai-act-2024-1689';
export const AI_ACT_URL = 'https://eur-lex.europa.eu/eli/reg/2024/1689/oj';

interface Provision {
  readonly id: string;
  readonly identifier: string;
  readonly title: string;
  /** A paraphrase of the provision. */
  readonly text: string;
  /** What the vault can hold for a run, in general terms (the claim says what it holds for this one). */
  readonly holds: string;
  readonly cannotKnow: readonly string[];
  /** The records a claim for this provision cites. */
  readonly cites: (r: ViewRecord) => boolean;
  /** This run's claim, from the counts of its records and the spec. */
  readonly claim: (facts: RunFacts) => string;
}

interface RunFacts {
  readonly runLabel: string;
  readonly status: string;
  readonly counts: Readonly<Record<string, number>>;
  readonly records: number;
  readonly steps: number;
  readonly recordedSteps: number;
  readonly datasets: number;
  readonly datasetSteps: number;
}

const all = () => true;
const ofKind =
  (...kinds: string[]) =>
  (r: ViewRecord) =>
    kinds.includes(r.kind);

/** `1 step`, `2 steps`. */
const n = (count: number, word: string): string => `${count} ${word}${count === 1 ? '' : 's'}`;

const counted = (c: Readonly<Record<string, number>>): string =>
  ['step', 'artifact', 'capability', 'policy', 'run']
    .filter((k) => (c[k] ?? 0) > 0)
    .map((k) => `${c[k]} ${k}`)
    .join(', ') || 'none';

export const PROVISIONS: readonly Provision[] = [
  {
    id: 'art-12-1',
    identifier: 'Art. 12(1)',
    title: 'Record-keeping: automatic recording of events',
    text: 'A high-risk AI system technically allows the automatic recording of events (logs) over its lifetime.',
    holds:
      'signed, hash-chained records of the run, appended automatically as the pipeline moves the Run: one per finished step, capability and policy pack, and the run provenance',
    cannotKnow: [
      'events inside the models and tools (prompts, tool calls, intermediate results) beyond the digests and fields the pipeline reports on the Run',
      'events of runs or systems that never reach the vault',
      'whether logging covers the AI system over its whole lifetime',
    ],
    cites: all,
    claim: (f) =>
      `The vault recorded ${n(f.records, 'event')} of run ${f.runLabel} automatically, as signed and hash-chained records (${counted(f.counts)}).`,
  },
  {
    id: 'art-12-2',
    identifier: 'Art. 12(2)',
    title: 'Record-keeping: events relevant for risks, post-market monitoring and operation',
    text: 'Logging enables recording events relevant for identifying situations that may present a risk (Art. 79(1)) or a substantial modification, for post-market monitoring (Art. 72) and for monitoring operation (Art. 26(5)).',
    holds:
      "per finished step: its phase (succeeded or failed, with the error's digest), start and end time, input and output digests, model name, provider, version and temperature or tool and command, policy pack; per capability: who granted which scope and who approved it; the run's outcome",
    cannotKnow: [
      'which recorded events indicate a risk within Art. 79(1) or a substantial modification',
      "the provider's post-market monitoring plan (Art. 72) and how the deployer monitors operation (Art. 26(5))",
      'the content of inputs and outputs: only their digests are recorded',
    ],
    cites: ofKind('step', 'capability', 'run'),
    claim: (f) =>
      `For run ${f.runLabel} (${f.status}) the vault holds ${f.recordedSteps} of ${n(f.steps, 'step')} with phase, times, digests, model or tool and policy pack, ${n(f.counts.capability ?? 0, 'capability grant')} with their approvers, and the run's provenance.`,
  },
  {
    id: 'art-19-1',
    identifier: 'Art. 19(1)',
    title: 'Automatically generated logs: kept at least six months',
    text: 'Providers keep the automatically generated logs under their control for a period appropriate to the intended purpose, of at least six months unless other Union or national law provides otherwise.',
    holds:
      'append-only records: the database refuses updates, deletes and truncation of them, the runtime role lacks those privileges, each record chains to the one before and signed checkpoints reveal a removed record',
    cannotKnow: [
      'how long this deployment keeps its database and its backups, and whether the records will exist six months from now',
      "whether the logs are under the provider's control",
      'retention duties under other Union or national law',
    ],
    cites: all,
    claim: (f) =>
      `The ${n(f.records, 'record')} of run ${f.runLabel} are held append-only and hash-chained in the vault that issued this view.`,
  },
  {
    id: 'annex-iv-2b',
    identifier: 'Annex IV, point 2(b)',
    title: 'Technical documentation: design specifications',
    text: 'The design specifications: the general logic of the system and its algorithms, key design choices with their rationale and assumptions, what the system is designed to optimise for, the expected output and its quality, and trade-offs made.',
    holds:
      'the run as designed and executed: its step graph (dag_digest), the model, provider, version and temperature of each model step, each tool and its command line, the policy packs and guardrails, all signed with the spec in the run provenance',
    cannotKnow: [
      'the general logic of the models and algorithms',
      'the design choices, their rationale and assumptions, and what the system optimises for',
      'the expected output, its quality, and the trade-offs made',
    ],
    cites: ofKind('run', 'step', 'policy'),
    claim: (f) =>
      `The run provenance of ${f.runLabel} signs its spec: ${n(f.steps, 'step')} with their dependencies, models, tools and policy packs; ${n(f.recordedSteps, 'step record')} restate what each finished step ran.`,
  },
  {
    id: 'annex-iv-2d',
    identifier: 'Annex IV, point 2(d)',
    title: 'Technical documentation: data requirements',
    text: 'Where relevant, the data requirements: datasheets on training methodologies and training data sets, their provenance, scope and main characteristics, how the data was obtained and selected, labelling and cleaning.',
    holds:
      'the datasets the steps declare (name, provider, version, location, type and SHA-256 when given), signed with the spec in the run provenance, and the digest of every step input',
    cannotKnow: [
      'the training data of the models, notably of models from third-party providers',
      'the provenance of the data beyond what the pipeline declares, and how it was obtained and selected',
      'labelling procedures and data cleaning',
    ],
    cites: ofKind('run'),
    claim: (f) =>
      f.datasets > 0
        ? `The run provenance of ${f.runLabel} signs ${n(f.datasets, 'dataset declaration')} of ${n(f.datasetSteps, 'step')}.`
        : `No step of run ${f.runLabel} declares a dataset; the run provenance signs the spec that says so, and the step records carry the digests of their inputs.`,
  },
  {
    id: 'annex-iv-2g',
    identifier: 'Annex IV, point 2(g)',
    title: 'Technical documentation: validation and testing',
    text: 'The validation and testing procedures, the validation and testing data and metrics used, and test logs and test reports dated and signed by the responsible persons.',
    holds:
      'dated and signed logs of the run: every record is a DSSE envelope signed with the service key or the namespace key and carries the times the pipeline reported',
    cannotKnow: [
      'whether this run is a validation or test run, and the procedures, data and metrics of testing',
      'test reports',
      'the responsible persons: the vault signs with a service or namespace key, not as a person',
    ],
    cites: ofKind('step', 'run'),
    claim: (f) =>
      `The ${n(f.recordedSteps, 'step record')} and the run provenance of ${f.runLabel} are dated (the times the pipeline reported) and signed by the vault.`,
  },
];

const property = (name: string, value: string): CdxProperty => ({ name: `vault:${name}`, value });

function factsOf(input: ViewInput): RunFacts {
  const counts: Record<string, number> = {};
  for (const r of input.records) counts[r.kind] = (counts[r.kind] ?? 0) + 1;
  const recordedSteps = new Set(input.records.filter((r) => r.kind === 'step').map((r) => r.stepId)).size;
  const datasetSteps = input.run.spec.steps.filter((s) => (s.datasets?.length ?? 0) > 0);
  return {
    runLabel: `${input.run.namespace}/${input.run.name} (${input.bom.metadata.run_id})`,
    status: input.bom.metadata.status,
    counts,
    records: input.records.length,
    steps: input.run.spec.steps.length,
    recordedSteps,
    datasets: datasetSteps.reduce((n, s) => n + (s.datasets?.length ?? 0), 0),
    datasetSteps: datasetSteps.length,
  };
}

const NOT_SCORED =
  "Not scored: whether the AI system conforms is the provider's assessment; this map states what the vault holds for this run and what it cannot know.";

export function aiActDeclarations(
  input: ViewInput,
  runRef: string,
): { standard: CdxStandard; attestation: CdxAttestation; claims: CdxClaim[] } {
  const facts = factsOf(input);
  const requirements: CdxRequirement[] = [];
  const claims: CdxClaim[] = [];
  const map: CdxMapEntry[] = [];
  for (const p of PROVISIONS) {
    const requirementRef = `requirement:eu-ai-act:${p.id}`;
    const claimRef = `claim:eu-ai-act:${p.id}`;
    requirements.push({
      'bom-ref': requirementRef,
      identifier: p.identifier,
      title: p.title,
      text: p.text,
      properties: [property('holds', p.holds), ...p.cannotKnow.map((c) => property('cannot_know', c))],
    });
    claims.push({
      'bom-ref': claimRef,
      target: runRef,
      predicate: p.claim(facts),
      reasoning: `The cited records are this run's, each a DSSE envelope signed by the vault. The vault cannot know: ${p.cannotKnow.join('; ')}.`,
      evidence: input.records.filter(p.cites).map((r) => evidenceRef(r.id)),
    });
    map.push({
      requirement: requirementRef,
      claims: [claimRef],
      conformance: { rationale: NOT_SCORED },
      confidence: {
        rationale: `The claim restates signed records of this run; it says nothing of ${p.cannotKnow[0]}.`,
      },
    });
  }
  return {
    standard: {
      'bom-ref': AI_ACT_STANDARD_REF,
      name: 'Regulation (EU) 2024/1689 (AI Act): record-keeping and technical documentation, evidence map',
      version: '2024-06-13',
      description:
        "What the vault holds for one run against Art. 12(1)-(2), Art. 19(1) and Annex IV points 2(b), 2(d) and 2(g), and what it cannot know. It supports, and does not replace, a provider's own assessment. Requirement texts are paraphrases: the Official Journal's text is authoritative.",
      owner: 'European Union',
      requirements,
      externalReferences: [
        { type: 'documentation', url: AI_ACT_URL, comment: 'Official Journal of the European Union' },
      ],
    },
    attestation: {
      summary: `EU AI Act evidence map for run ${input.bom.metadata.run_id}: what the vault holds and what it cannot know; not a conformity assessment.`,
      assessor: ASSESSOR_REF,
      map,
    },
    claims,
  };
}

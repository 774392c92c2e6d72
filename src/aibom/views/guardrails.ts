import { subjectNames } from '../../attest/index.ts';
import { packContext, resolveStepPack } from '../../policy/index.ts';
import type { AibomPolicy } from '../types.ts';
import {
  ASSESSOR_REF,
  evidenceRef,
  type CdxAttestation,
  type CdxClaim,
  type CdxMapEntry,
  type CdxRequirement,
  type CdxStandard,
} from './cdxa.ts';
import { policyFacts, stepFacts, type ViewInput, type ViewRecord } from './input.ts';

/**
 * The policy packs of a run as CDXA standards: one standard per pack@version the AIBOM lists, one
 * requirement per guardrail it declares, one claim per requirement for this run.
 *
 * What the vault can vouch for, and what it cannot: a policy record lists the pack's guardrails and
 * each step record names the pack the step ran under; both are signed records. Nothing in the vault
 * observes a guardrail acting (no trigger, no verdict). So a claim states coverage (k of the n steps
 * the pack governs ran under it, in recorded evidence) and scores conformance k/n with confidence 0
 * (the records show the guardrail declared for those steps, not enforced); a guardrail no recorded
 * step ran under is not exercised: its claim is a counter-claim, conformance 0.
 */
export interface GuardrailDeclarations {
  standards: CdxStandard[];
  attestations: CdxAttestation[];
  claims: CdxClaim[];
}

const packKey = (name: string, version: string): string => JSON.stringify([name, version]);
const stepCount = (n: number): string => (n === 1 ? '1 step' : `${n} steps`);

export const standardRef = (p: Pick<AibomPolicy, 'pack' | 'version'>): string =>
  `standard:${subjectNames.policy(p.pack, p.version)}`;

export function guardrailDeclarations(input: ViewInput, runRef: string): GuardrailDeclarations {
  const { run, bom, records } = input;
  // The step packs as the recorder resolved them when it signed the step records (no override: a
  // view is of the stored AIBOM).
  const packs = packContext(run.spec);
  const stepRecords = new Map<string, { record: ViewRecord; pack: string }>();
  const policyRecords = new Map<string, { record: ViewRecord; guardrails: readonly string[] }>();
  for (const r of records) {
    const step = stepFacts(r);
    if (step !== undefined && r.stepId !== null) {
      stepRecords.set(r.stepId, { record: r, pack: packKey(step.pack.name, step.pack.version) });
    }
    const policy = policyFacts(r);
    if (policy !== undefined) {
      policyRecords.set(packKey(policy.pack, policy.version), { record: r, guardrails: policy.guardrails });
    }
  }

  const standards: CdxStandard[] = [];
  const attestations: CdxAttestation[] = [];
  const claims: CdxClaim[] = [];
  for (const policy of bom.components.policies) {
    const key = packKey(policy.pack, policy.version);
    const subject = subjectNames.policy(policy.pack, policy.version);
    const label = `${policy.pack}@${policy.version}`;
    // The steps the pack governs: the same resolution the recorder signed into each step record.
    const governed = run.spec.steps.filter((s) => {
      const p = resolveStepPack(s, packs);
      return packKey(p.name, p.version) === key;
    });
    const recorded = governed.flatMap((s) => {
      const r = stepRecords.get(s.id);
      return r !== undefined && r.pack === key ? [{ id: s.id, record: r.record }] : [];
    });
    const policyRecord = policyRecords.get(key);
    const requirements: CdxRequirement[] = [];
    const map: CdxMapEntry[] = [];
    policy.guardrails.forEach((guardrail, i) => {
      const requirementRef = `requirement:${subject}:${i}`;
      const claimRef = `claim:${subject}:${i}`;
      requirements.push({
        'bom-ref': requirementRef,
        identifier: guardrail,
        title: `Guardrail ${guardrail}`,
        text: `Guardrail "${guardrail}" is applied to every step of the run that policy pack ${label} governs.`,
      });
      const listed = policyRecord?.guardrails.includes(guardrail) === true;
      const k = recorded.length;
      const n = governed.length;
      const evidence = [
        ...(listed && policyRecord !== undefined ? [evidenceRef(policyRecord.record.id)] : []),
        ...recorded.map((s) => evidenceRef(s.record.id)),
      ];
      const exercised = k > 0;
      claims.push({
        'bom-ref': claimRef,
        target: runRef,
        predicate: exercised
          ? `${k} of ${stepCount(n)} governed by policy pack ${label} ran under it (${recorded.map((s) => s.id).join(', ')}); the pack declares guardrail "${guardrail}".`
          : n === 0
            ? `No step of the run is governed by policy pack ${label}: guardrail "${guardrail}" was not exercised.`
            : `Not one of ${stepCount(n)} governed by policy pack ${label} is recorded as having run: guardrail "${guardrail}" was not exercised.`,
        reasoning:
          (listed
            ? `The policy record lists "${guardrail}" among the guardrails of ${label}`
            : `No policy record of this run lists "${guardrail}" for ${label}`) +
          '; each cited step record names the pack its step ran under. These signed records show the guardrail declared for those steps. The vault does not observe guardrails: nothing it holds shows that the guardrail acted on a step or what it decided.',
        evidence,
      });
      map.push(
        exercised
          ? {
              requirement: requirementRef,
              claims: [claimRef],
              conformance: {
                score: k / n,
                rationale: `${k} of ${stepCount(n)} governed by ${label} recorded under it; the pack declares the guardrail.`,
              },
              confidence: {
                score: 0,
                rationale:
                  'The records show the guardrail declared for these steps, not enforced: the vault holds no trigger or verdict of it, so it cannot vouch that the requirement is met.',
              },
            }
          : {
              requirement: requirementRef,
              counterClaims: [claimRef],
              conformance: {
                score: 0,
                rationale: 'Not exercised: no recorded step of this run ran under the pack.',
              },
              confidence: {
                score: 1,
                rationale: `No step record of this run names ${label}; the AIBOM lists every record of the run up to it.`,
              },
            },
      );
    });
    standards.push({
      'bom-ref': standardRef(policy),
      name: policy.pack,
      version: policy.version,
      description: `Policy pack ${label}: its guardrails as the run declares them (the AIBOM's components.policies).`,
      requirements,
    });
    attestations.push({
      summary: `Guardrails of policy pack ${label} for run ${bom.metadata.run_id}: declared coverage from signed records; enforcement is not observed by the vault.`,
      assessor: ASSESSOR_REF,
      map,
    });
  }
  return { standards, attestations, claims };
}

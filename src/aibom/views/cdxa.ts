import type { CdxProperty } from '../cyclonedx.ts';
import type { ViewRecord } from './input.ts';

/**
 * CycloneDX Attestations (CDXA, CycloneDX 1.6+): the shapes the 1.7 view emits (a subset of the
 * official schema's `definitions.standards` and `declarations`), and the evidence every claim cites.
 */

export interface CdxExternalReference {
  type: 'attestation' | 'bom' | 'documentation' | 'distribution';
  url: string;
  comment?: string;
  hashes?: { alg: 'SHA-256'; content: string }[];
}

export interface CdxRequirement {
  'bom-ref': string;
  identifier: string;
  title: string;
  text: string;
  descriptions?: string[];
  properties?: CdxProperty[];
  externalReferences?: CdxExternalReference[];
}

export interface CdxStandard {
  'bom-ref': string;
  name: string;
  version: string;
  description: string;
  owner?: string;
  requirements: CdxRequirement[];
  externalReferences?: CdxExternalReference[];
}

export interface CdxClaim {
  'bom-ref': string;
  /** What the claim is about: the run (`run:<id>`, the BOM's metadata.component). */
  target: string;
  predicate: string;
  reasoning: string;
  /** bom-refs of `declarations.evidence` entries. */
  evidence: string[];
}

export interface CdxEvidence {
  'bom-ref': string;
  description: string;
  /** `attestation`: `urn:uuid:<id>`; `dsse-digest`: the record digest `sha256:<hex>` as text. */
  data: { name: string; contents: { url?: string; attachment?: { contentType: string; content: string } } }[];
}

export interface CdxScore {
  /** 0-1; absent where the vault does not score (the EU AI Act map: never claimed). */
  score?: number;
  rationale: string;
}

export interface CdxMapEntry {
  requirement: string;
  claims?: string[];
  counterClaims?: string[];
  conformance: CdxScore;
  confidence: CdxScore;
}

export interface CdxAttestation {
  summary: string;
  assessor: string;
  map: CdxMapEntry[];
}

export interface CdxDeclarations {
  assessors: { 'bom-ref': string; thirdParty: false; organization: { name: string } }[];
  attestations: CdxAttestation[];
  claims: CdxClaim[];
  evidence: CdxEvidence[];
  affirmation: { statement: string };
}

/** The one assessor: the vault itself, assessing its own records (not a third party). */
export const ASSESSOR_REF = 'assessor:aibom-vault';

/** Evidence bom-refs name the record: `evidence:<attestation id>`. */
export const evidenceRef = (recordId: string): string => `evidence:${recordId}`;

/** Human name of a record's kind, for descriptions. */
export function recordLabel(r: ViewRecord): string {
  const step = r.stepId !== null ? ` of step ${r.stepId}` : '';
  switch (r.kind) {
    case 'run':
      return 'run provenance record (SLSA v1)';
    case 'policy':
      return 'policy record';
    case 'capability':
      return `capability record${step}`;
    case 'step':
      return `step record${step}`;
    default:
      return `${r.kind} record${step}`;
  }
}

/**
 * One evidence entry per record of the AIBOM: the record by id (`urn:uuid:<id>`, what
 * `GET /v1/attestations/{id}` and export bundles name it by) and by its digest, the SHA-256 of the
 * JCS of its signed DSSE envelope (docs/digest.md), so a reader can match it to the envelope.
 */
export function evidenceOf(r: ViewRecord): CdxEvidence {
  return {
    'bom-ref': evidenceRef(r.id),
    description: `${recordLabel(r)} ${r.id}: a DSSE envelope signed by the vault, record digest ${r.digest}`,
    data: [
      { name: 'attestation', contents: { url: `urn:uuid:${r.id}` } },
      { name: 'dsse-digest', contents: { attachment: { contentType: 'text/plain', content: r.digest } } },
    ],
  };
}

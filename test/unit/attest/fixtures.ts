/**
 * Deterministic inputs for every statement builder: fixed ids and timestamps, so the statements
 * (not the ECDSA signatures, which are randomised) are byte-stable and can be golden-tested.
 */
import type {
  AibomInput,
  ArtifactInput,
  CapabilityInput,
  PolicyInput,
  RunInput,
  StepInput,
} from '../../../src/attest/index.ts';

export const RUN_ID = '0190f3a0-7c1e-7a4b-9d2e-5f6a7b8c9d0e';
const pack = { name: 'baseline', version: '1.4.0' };

export const runInput: RunInput = {
  runId: RUN_ID,
  spec: {
    policyPack: 'baseline@1.4.0',
    steps: [
      {
        id: 'summarize',
        model: { name: 'gpt-4o', provider: 'openai', version: '2024-08-06', temperature: 0.2 },
      },
      { id: 'scan', tool: { name: 'trivy', command: ['trivy', 'fs', '--format', 'json', '.'] } },
    ],
    inputs: { document: 's3://inputs/report.pdf' },
  },
  namespace: 'team-a',
  policyPack: pack,
  models: [
    { name: 'gpt-4o', provider: 'openai', version: '2024-08-06' },
    { name: 'gpt-4o', provider: 'openai', version: '2024-08-06' },
  ],
  tools: [{ name: 'trivy', version: '0.58.1', sha256: 'a'.repeat(64) }],
  startedOn: '2025-01-15T10:00:00Z',
  finishedOn: '2025-01-15T10:05:30Z',
  builderVersion: { controller: '0.1.0' },
};

export const modelStepInput: StepInput = {
  runId: RUN_ID,
  stepId: 'summarize',
  kind: 'model',
  model: { name: 'gpt-4o', provider: 'openai', version: '2024-08-06', temperature: 0.2 },
  inputs: { prompt: 'Summarize the report', document: 's3://inputs/report.pdf' },
  output: { summary: 'All checks passed.', tokens: 812 },
  phase: 'succeeded',
  startedAt: '2025-01-15T10:00:01Z',
  finishedAt: '2025-01-15T10:02:10Z',
  policyPack: pack,
};

export const toolStepInput: StepInput = {
  runId: RUN_ID,
  stepId: 'scan',
  kind: 'tool',
  tool: { name: 'trivy', command: ['trivy', 'fs', '--format', 'json', '.'] },
  inputs: { path: '.' },
  output: { error: 'exit status 1', code: 1 },
  phase: 'failed',
  startedAt: '2025-01-15T10:02:11Z',
  finishedAt: '2025-01-15T10:05:29Z',
  policyPack: pack,
};

export const artifactInput: ArtifactInput = {
  runId: RUN_ID,
  name: 'summary.json',
  mediaType: 'application/json',
  sha256: 'b'.repeat(64),
  size: 2048,
  bucket: 'aibom-vault',
  key: `runs/${RUN_ID}/summary.json`,
};

export const policyInput: PolicyInput = {
  runId: RUN_ID,
  pack: 'baseline',
  version: '1.4.0',
  guardrails: ['no-pii-output', 'approved-models-only', 'max-temperature-0.7'],
  decision: 'allow',
};

export const capabilityInput: CapabilityInput = {
  runId: RUN_ID,
  stepId: 'summarize',
  index: 0,
  chain: [
    {
      scope: 'models:invoke',
      grantedBy: 'system:serviceaccount:team-a:pipeline',
      approvedBy: 'alice@example.com',
    },
    { scope: 'models:invoke:openai/gpt-4o', grantedBy: 'run:' + RUN_ID },
  ],
};

export const aibomInput: AibomInput = {
  runId: RUN_ID,
  sha256: 'c'.repeat(64),
  bom: {
    bom_format: 'CycloneDX',
    spec_version: '1.5',
    serial_number: 'urn:uuid:0190f3a0-7c1e-7a4b-9d2e-000000000001',
    metadata: { run_id: RUN_ID, status: 'succeeded', policy_pack: 'baseline', policy_pack_version: '1.4.0' },
    components: { models: [], tools: [], policies: [] },
    trust: { subjects: [`run:${RUN_ID}`], attestation_ids: [] },
  },
};

/**
 * The spec's "AIBOM payload" table (spec/interface.md), written out path by path with the type it
 * gives, in the notation of leafPaths: arrays as `[]`, arrays of objects expanded to their members.
 */
export const SPEC_PATHS: Readonly<Record<string, 'string' | 'number'>> = {
  bom_format: 'string',
  spec_version: 'string',
  serial_number: 'string',
  'metadata.run_id': 'string',
  'metadata.status': 'string',
  'metadata.policy_pack': 'string',
  'metadata.policy_pack_version': 'string',
  'metadata.dag_digest': 'string',
  'metadata.input_digest': 'string',
  'components.models[].id': 'string',
  'components.models[].type': 'string',
  'components.models[].name': 'string',
  'components.models[].provider': 'string',
  'components.models[].version': 'string',
  'components.models[].digests[].alg': 'string',
  'components.models[].digests[].content': 'string',
  'components.models[].properties.step_id': 'string',
  'components.models[].properties.policy_pack': 'string',
  'components.models[].properties.temperature': 'number',
  'components.tools[].id': 'string',
  'components.tools[].type': 'string',
  'components.tools[].name': 'string',
  'components.tools[].digests[].alg': 'string',
  'components.tools[].digests[].content': 'string',
  'components.tools[].properties.step_id': 'string',
  'components.tools[].properties.command[]': 'string',
  'components.policies[].pack': 'string',
  'components.policies[].version': 'string',
  'components.policies[].guardrails[]': 'string',
  'trust.subjects[]': 'string',
  'trust.attestation_ids[]': 'string',
};

/** Paths outside any array: present in every payload. */
export const ALWAYS_PRESENT = Object.keys(SPEC_PATHS).filter((p) => !p.includes('[]'));

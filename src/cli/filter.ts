import { parsePolicyPackRef, PolicyError } from '../policy/index.ts';
import type { ApiClient } from './client.ts';
import { CliError, type OptionSpecs } from './command.ts';
import { parseRunRef, runOption } from './options.ts';

/**
 * The record selection flags of `attestation query` and `attestation export` (one definition: the
 * two commands select the same records for the same flags), and the API's filter body they make
 * (docs/api.md, the query's fields; the export route takes the same).
 */
export const KINDS = ['run', 'step', 'artifact', 'policy', 'capability', 'aibom'];

export const filterOptions = {
  ...runOption,
  subject: { type: 'string', value: 'SUBJECT', description: 'exact subject, e.g. step:<run id>:<step id>' },
  step: { type: 'string', value: 'STEP', description: 'step id (with --run: that step of the run)' },
  'artifact-digest': { type: 'string', value: 'sha256:HEX', description: 'records about this artifact' },
  'policy-pack': {
    type: 'string',
    value: 'PACK[@VERSION]',
    description: 'records governed by this policy pack',
  },
  'capability-token': {
    type: 'string',
    value: 'TOKEN',
    description:
      'records of or authorised by a capability token (VC, Biscuit, token id, capability id or scope)',
  },
  kind: { type: 'string', value: 'KIND', description: `record kind: ${KINDS.join(', ')}` },
  from: { type: 'string', value: 'TIME', description: 'created at or after (RFC 3339)' },
  to: { type: 'string', value: 'TIME', description: 'created before (RFC 3339)' },
  namespace: {
    type: 'string',
    short: 'n',
    multiple: true,
    value: 'NS',
    description: 'only these namespaces',
  },
} as const satisfies OptionSpecs;

/** The parsed values of {@link filterOptions}. */
interface FilterValues {
  readonly run?: string | undefined;
  readonly subject?: string | undefined;
  readonly step?: string | undefined;
  readonly 'artifact-digest'?: string | undefined;
  readonly 'policy-pack'?: string | undefined;
  readonly 'capability-token'?: string | undefined;
  readonly kind?: string | undefined;
  readonly from?: string | undefined;
  readonly to?: string | undefined;
  readonly namespace?: string[] | undefined;
}

/** The API's filter body from the selection flags; a bad flag is a usage error (exit 2). */
export async function filterOf(
  values: FilterValues,
  client: () => ApiClient,
): Promise<Record<string, unknown>> {
  const filter: Record<string, unknown> = {};
  if (values.run !== undefined) {
    const ref = parseRunRef(values.run);
    filter.run_id = await client().runId(ref);
  }
  if (values.subject !== undefined) filter.subject = values.subject;
  if (values.step !== undefined) filter.step_id = values.step;
  if (values['artifact-digest'] !== undefined) filter.artifact_digest = values['artifact-digest'];
  if (values['policy-pack'] !== undefined) {
    try {
      const { name, version } = parsePolicyPackRef(values['policy-pack']);
      filter.policy_pack = version !== undefined ? { name, version } : { name };
    } catch (err) {
      // parsePolicyPackRef names the flag itself.
      if (err instanceof PolicyError) throw new CliError(err.message, 2);
      throw err;
    }
  }
  if (values['capability-token'] !== undefined) filter.capability_token = values['capability-token'];
  if (values.kind !== undefined) {
    if (!KINDS.includes(values.kind)) throw new CliError(`--kind is one of ${KINDS.join(', ')}`, 2);
    filter.kind = values.kind;
  }
  for (const bound of ['from', 'to'] as const) {
    const v = values[bound];
    if (v === undefined) continue;
    if (Number.isNaN(Date.parse(v)) || !/^\d{4}-\d\d-\d\dT/.test(v))
      throw new CliError(`--${bound}: ${v} is not an RFC 3339 time`, 2);
    filter[bound] = v;
  }
  if (values.namespace !== undefined) filter.namespaces = [...new Set(values.namespace)];
  return filter;
}

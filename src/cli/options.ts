import { loadConfig } from '../config/index.ts';
import { ApiClient } from './client.ts';
import { CliError, type OptionSpecs } from './command.ts';

/** Flags every API-calling command accepts; they override SERVICE_API_URL / SERVICE_TOKEN. */
export const apiOptions = {
  'api-url': { type: 'string', value: 'URL', description: 'base URL of the API (default: SERVICE_API_URL)' },
  token: {
    type: 'string',
    value: 'TOKEN',
    description: 'bearer token sent to the API (default: SERVICE_TOKEN)',
  },
} as const satisfies OptionSpecs;

export function clientFrom(values: {
  'api-url'?: string | undefined;
  token?: string | undefined;
}): ApiClient {
  const config = loadConfig('cli');
  const token = values.token ?? config.SERVICE_TOKEN;
  return new ApiClient({
    baseUrl: values['api-url'] ?? config.SERVICE_API_URL,
    ...(token !== undefined ? { token } : {}),
  });
}

/** Any UUID, either case (run ids are Run UIDs, attestation ids UUIDv7). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A namespace is a DNS-1123 label; a Run's name a DNS-1123 subdomain. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A run as the user names it: its UUID (the Run's metadata.uid), or `namespace/name` as kubectl shows it. */
export type RunRef = { readonly id: string } | { readonly namespace: string; readonly name: string };

/** The `--run` flag of the commands that name a run. */
export const runOption = {
  run: {
    type: 'string',
    value: 'RUN',
    description: 'the run: its UUID (metadata.uid) or NAMESPACE/NAME as kubectl shows it',
  },
} as const satisfies OptionSpecs;

/** Parses a run reference; a usage error (exit 2) names the flag. */
export function parseRunRef(text: string | undefined, flag = '--run'): RunRef {
  if (text === undefined || text === '') throw new CliError(`${flag} <UUID|NAMESPACE/NAME> is required`, 2);
  if (UUID.test(text)) return { id: text.toLowerCase() };
  const [namespace, name, ...rest] = text.split('/');
  if (
    rest.length === 0 &&
    namespace !== undefined &&
    name !== undefined &&
    namespace.length <= 63 &&
    DNS_LABEL.test(namespace) &&
    name.length <= 253 &&
    DNS_SUBDOMAIN.test(name)
  ) {
    return { namespace, name };
  }
  throw new CliError(`${flag}: ${text} is neither a run UUID nor NAMESPACE/NAME`, 2);
}

export const runRefText = (ref: RunRef): string => ('id' in ref ? ref.id : `${ref.namespace}/${ref.name}`);

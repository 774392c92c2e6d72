import { loadConfig } from '../config/index.ts';
import { ApiClient } from './client.ts';

/** Flags every API-calling command accepts; they override SERVICE_API_URL / SERVICE_TOKEN. */
export const apiOptions = {
  'api-url': { type: 'string' },
  token: { type: 'string' },
} as const;

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

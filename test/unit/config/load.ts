import { loadConfig } from '../../../src/config/index.ts';

/** The least a controller's configuration needs (values never dialled). */
export const controllerEnv = {
  DATABASE_URL: 'postgres://x@y/z',
  S3_ENDPOINT: 'http://s3',
  S3_ACCESS_KEY: 'a',
  S3_SECRET_KEY: 'b',
};

/** The error message of the controller's configuration with `extra` set; empty when it loads. */
export function configProblems(extra: Record<string, string>): string {
  try {
    loadConfig('controller', { ...controllerEnv, ...extra });
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

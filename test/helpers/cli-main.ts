import { vi } from 'vitest';
import { main } from '../../src/cli/main.ts';

/** Runs service-ctl's main() in this process and captures what it writes (stdout, console.error). */
export async function cliMain(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => {
    stderr += `${a.join(' ')}\n`;
  });
  try {
    return { code: await main(argv), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/**
 * The environment of a service-ctl child process against `apiUrl` as `token`: this process's
 * environment, then `env` on top, where an entry set to undefined is removed (a shell without
 * SERVICE_TRUST_ANCHOR, say).
 */
export function serviceCtlEnv(
  apiUrl: string,
  token: string,
  env: Record<string, string | undefined> = {},
): Record<string, string> {
  const merged: Record<string, string | undefined> = {
    ...process.env,
    SERVICE_API_URL: apiUrl,
    SERVICE_TOKEN: token,
    ...env,
  };
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(merged)) if (v !== undefined) out[k] = v;
  return out;
}

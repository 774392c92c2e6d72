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

import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';

/** Runs a host command; the error carries its stderr. */
export async function sh(cmd: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`, { cause: err }));
      else resolve(stdout);
    });
    // A child that exits without reading its stdin must not crash us with EPIPE.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}

/** Like sh, but a failure is only returned, not thrown (teardown goes on past it). */
export async function trySh(cmd: string, args: readonly string[], input?: string): Promise<string | Error> {
  try {
    return await sh(cmd, args, input);
  } catch (err) {
    return err as Error;
  }
}

export const run = promisify(execFile);

/**
 * Kernel settings the kubelet changes at start (pkg/kubelet/cm: `protectKernelDefaults: false`
 * makes it set these), which `down` restores: the node leaves the host's kernel as it found it.
 */
export const KUBELET_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
] as const;

/** The values of `keys` (paths under /proc/sys), for restoreSysctls. Unreadable keys are left out. */
export async function saveSysctls(keys: readonly string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    try {
      out[k] = (await readFile(`/proc/sys/${k}`, 'utf8')).trim();
    } catch {
      /* not on this kernel */
    }
  }
  return out;
}

/** Writes back what saveSysctls read; returns the keys it could not restore. */
export async function restoreSysctls(saved: Record<string, string>): Promise<string[]> {
  const failed: string[] = [];
  for (const [k, v] of Object.entries(saved)) {
    try {
      if ((await readFile(`/proc/sys/${k}`, 'utf8')).trim() !== v) await writeFile(`/proc/sys/${k}`, v);
    } catch {
      failed.push(k);
    }
  }
  return failed;
}

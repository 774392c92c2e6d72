/**
 * The machine's one node: which stack holds it. The bridge, the nftables tables and the kubelet's
 * kernel settings are host-wide, so one stack at a time owns them; its owner file names the stack
 * (its temp dir) and, once the node starts, the node's state (index.ts writeOwner).
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';

export interface ClaimOptions<O extends { readonly root: string }> {
  /** The owner file (index.ts OWNER_FILE; a temp file in tests). */
  readonly file: string;
  /** How long to wait for a live owner to stop; 0 refuses at once. */
  readonly waitMs: number;
  /** How often to look again while waiting (default 5 s). */
  readonly pollMs?: number;
  readonly log?: (line: string) => void;
  /** Whether a stale owner (or none) left host state behind that `cleanup` must remove first. */
  readonly leftovers: (stale: O | undefined) => Promise<boolean>;
  /** Removes a stale owner's host state; throws when it cannot. */
  readonly cleanup: (stale: O | undefined) => Promise<void>;
}

async function readOwner<O>(file: string): Promise<O | undefined> {
  return readFile(file, 'utf8')
    .then((t) => JSON.parse(t) as O)
    .catch(() => undefined);
}

const isLive = async (owner: { readonly root: string } | undefined): Promise<boolean> =>
  Boolean(owner && (await stat(owner.root).catch(() => undefined)));

/**
 * Claims the node for the stack in `root`. An owner whose stack is gone (its temp dir removed
 * without `down`, or a crash) is stale: its leftovers are cleaned up and its file replaced. A live
 * one is waited for up to `waitMs`, so two test runs on one machine (a CI run beside a check of
 * the same tree) take turns instead of the second failing.
 *
 * The file is created exclusively: of two claimants that both saw the node released (`down`
 * removes the file), one writes it and the other finds it and waits again.
 */
export async function claimNode<O extends { readonly root: string }>(
  root: string,
  opts: ClaimOptions<O>,
): Promise<void> {
  const deadline = Date.now() + opts.waitMs;
  let told = false;
  for (;;) {
    const owner = await readOwner<O>(opts.file);
    if (owner && (await isLive(owner))) {
      const held = `a node is already running on this machine for the stack in ${owner.root} (one per machine)`;
      if (Date.now() >= deadline) {
        const waited = opts.waitMs > 0 ? ` (waited ${Math.round(opts.waitMs / 1000)} s)` : '';
        throw new Error(`${held}; stop it first (npm run stack -- down in that checkout)${waited}`);
      }
      if (!told) opts.log?.(`${held}: waiting up to ${Math.round(opts.waitMs / 1000)} s for it to stop`);
      told = true;
      await new Promise((r) =>
        setTimeout(r, Math.min(opts.pollMs ?? 5_000, Math.max(0, deadline - Date.now()))),
      );
      continue;
    }
    if (await opts.leftovers(owner)) await opts.cleanup(owner);
    if (owner) await rm(opts.file, { force: true });
    const wrote = await writeFile(opts.file, JSON.stringify({ root, pid: process.pid }), {
      mode: 0o600,
      flag: 'wx',
    }).then(
      () => true,
      (e: NodeJS.ErrnoException) => {
        if (e.code === 'EEXIST') return false;
        throw e;
      },
    );
    if (wrote) return;
  }
}

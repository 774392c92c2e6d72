/**
 * The controller and the sidecar never load @kubernetes/client-node at start: importing it loads
 * its whole generated API (79 MiB RSS, 25 MiB of heap, kept for the process's life; src/kube/access.ts).
 * Only a kubeconfig the service cannot use itself (exec plugins, auth providers, proxies) imports it,
 * dynamically. This walks the static imports of both entry points as Node runs them: `import type`
 * is erased, but `import { type X } from` still loads the module, so it counts.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..');

/** Static import and re-export specifiers that load a module (not `import type`, not `import(…)`). */
function loadedSpecifiers(text: string): string[] {
  const found: string[] = [];
  const statement = /^(?:import|export)\s+(type\s+)?(?:[^;'"]*?\s+from\s+)?'([^']+)'/gms;
  for (const m of text.matchAll(statement)) if (m[1] === undefined && m[2] !== undefined) found.push(m[2]);
  return found;
}

/** Every module reachable from `entry` by static imports: files of this repo and package names. */
function graph(entry: string): { files: Set<string>; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>();
  const todo = [resolve(root, entry)];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of loadedSpecifiers(readFileSync(file, 'utf8'))) {
      if (spec.startsWith('.')) todo.push(resolve(dirname(file), spec));
      else if (!spec.startsWith('node:') && !packages.has(spec))
        packages.set(spec, file.slice(root.length + 1));
    }
  }
  return { files, packages };
}

describe('what the service processes load at start', () => {
  it.each(['src/bin/controller.ts', 'src/bin/sidecar.ts'])(
    '%s does not import @kubernetes/client-node',
    (entry) => {
      const { files, packages } = graph(entry);
      // The walk sees the wiring it guards (a walk that reads nothing would pass).
      expect(files.size).toBeGreaterThan(50);
      expect(packages.has('pg')).toBe(true);
      expect([...files].some((f) => f.endsWith('src/kube/access.ts'))).toBe(true);
      const clientNode = [...packages].filter(([p]) => p.startsWith('@kubernetes/client-node'));
      expect(clientNode, 'imported by').toEqual([]);
    },
  );

  it('counts `import { type X }` as a load and `import type` as none', () => {
    expect(
      loadedSpecifiers(
        [
          "import type { A } from 'erased';",
          "import { type B } from 'loaded-1';",
          "import {\n  C,\n  type D,\n} from 'loaded-2';",
          "import 'loaded-3';",
          "export * from 'loaded-4';",
          "export type { E } from 'erased-too';",
          "const x = await import('dynamic');",
        ].join('\n'),
      ),
    ).toEqual(['loaded-1', 'loaded-2', 'loaded-3', 'loaded-4']);
  });
});

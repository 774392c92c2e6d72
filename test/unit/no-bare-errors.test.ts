/**
 * Every error src/ throws carries a stable `code` (the shared base in src/errors.ts): callers, the
 * problem+json handler and the CLI switch on it. A bare `throw new Error(` has none; states the
 * code itself makes impossible throw InvariantError (code INVARIANT).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('errors', () => {
  const root = join(import.meta.dirname, '..', '..', 'src');
  const files = sources(root);

  it('no bare `throw new Error(` in src/', () => {
    const bare = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          /\bthrow new Error\(/.test(line) ? [`${f.slice(root.length + 1)}:${i + 1}`] : [],
        ),
    );
    expect(bare).toEqual([]);
  });

  it('sees the sources it checks (a guard that reads nothing would pass)', () => {
    expect(files.length).toBeGreaterThan(200);
    expect(files.some((f) => readFileSync(f, 'utf8').includes('throw new InvariantError('))).toBe(true);
  });
});

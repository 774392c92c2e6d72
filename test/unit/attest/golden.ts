import { readFile, writeFile } from 'node:fs/promises';
import { format, resolveConfig } from 'prettier';
import { expect } from 'vitest';
import { canonicalJson } from '../../../src/attest/json.ts';

/** Regenerate with: UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/attest */
const UPDATE = process.env.UPDATE_GOLDEN === '1';
const dir = new URL('../../fixtures/golden/', import.meta.url);

/**
 * Compares a JSON value with test/fixtures/golden/<name> by RFC 8785 canonical form, i.e. exactly
 * the bytes that would be signed; the file itself is prettier-formatted for review and lint, so
 * reformatting it never breaks the test.
 */
export async function expectGoldenJson(name: string, actual: unknown): Promise<void> {
  const url = new URL(name, dir);
  if (UPDATE) {
    const options = (await resolveConfig(url)) ?? {};
    await writeFile(url, await format(JSON.stringify(actual), { ...options, parser: 'json' }));
    return;
  }
  let text: string;
  try {
    text = await readFile(url, 'utf8');
  } catch {
    throw new Error(
      `golden file ${name} is missing; regenerate: UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/attest`,
    );
  }
  const message = `${name} differs; if intended, regenerate with UPDATE_GOLDEN=1`;
  // Structural first for a readable diff, then byte equality of the canonical forms.
  expect(JSON.parse(canonicalJson(actual)), message).toEqual(JSON.parse(text));
  expect(canonicalJson(actual), message).toBe(canonicalJson(JSON.parse(text)));
}

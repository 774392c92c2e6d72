import { readFile, writeFile } from 'node:fs/promises';
import { format, resolveConfig } from 'prettier';
import { expect } from 'vitest';
import { canonicalJson } from '../../../src/attest/index.ts';

/** Regenerate with: UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/aibom */
export const UPDATE = process.env.UPDATE_GOLDEN === '1';
const dir = new URL('../../fixtures/aibom/', import.meta.url);

export async function readFixture(name: string): Promise<unknown> {
  return JSON.parse(await readFile(new URL(name, dir), 'utf8')) as unknown;
}

/**
 * Compares a JSON value with test/fixtures/aibom/<name> by RFC 8785 canonical form (the bytes that
 * are stored and signed); the file is prettier-formatted for review, so reformatting it never breaks
 * the test, while any change of a member, value or array order does.
 */
export async function expectGoldenJson(name: string, actual: unknown, base: URL = dir): Promise<void> {
  const url = new URL(name, base);
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
      `golden file ${name} is missing; regenerate: UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/aibom`,
    );
  }
  const message = `${name} differs; if intended, regenerate with UPDATE_GOLDEN=1 npx vitest run --project unit test/unit/aibom`;
  expect(JSON.parse(canonicalJson(actual)), message).toEqual(JSON.parse(text));
  expect(canonicalJson(actual), message).toBe(canonicalJson(JSON.parse(text)));
}

/** A golden text value (one line), e.g. a digest; compared exactly. */
export async function expectGoldenText(name: string, actual: string): Promise<void> {
  const url = new URL(name, dir);
  if (UPDATE) {
    await writeFile(url, `${actual}\n`);
    return;
  }
  expect(actual, `${name} differs; if intended, regenerate with UPDATE_GOLDEN=1`).toBe(
    (await readFile(url, 'utf8')).trimEnd(),
  );
}

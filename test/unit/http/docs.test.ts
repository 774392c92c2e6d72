import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TRANSPARENCY_STATUS } from '../../../src/http/error-handler.ts';
import { PROBLEM_CODES } from '../../../src/http/problem.ts';

describe('docs/api.md', () => {
  it('documents every error code the API can answer', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'api.md'), 'utf8');
    const codes = [...PROBLEM_CODES, ...Object.keys(TRANSPARENCY_STATUS)];
    expect(codes.filter((code) => !doc.includes(`\`${code}\``))).toEqual([]);
  });
});

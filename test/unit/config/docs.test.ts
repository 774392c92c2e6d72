import { describe, expect, it } from 'vitest';
import { staleFiles } from '../../../hack/config-table.ts';

describe('configuration reference', () => {
  it('docs/configuration.md and the README table are what src/config/schema.ts generates', async () => {
    // When this fails: npm run docs:config
    expect(await staleFiles()).toEqual([]);
  });
});

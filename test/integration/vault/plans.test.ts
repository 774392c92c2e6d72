import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROLLER_PLANS } from '../../../src/controller/manager.ts';
import { createVaultPool, migrate, openVault, type PlanCacheMode } from '../../../src/vault/index.ts';
import { freshDatabase, type FreshDatabase } from './helpers.ts';

/**
 * The pool's `plans` option reaches the planner: with `auto` (the controller's) a named statement
 * gets PostgreSQL's generic plan after its first custom ones; by default (the API's) every call is
 * planned with its values. Counted by the server itself (pg_prepared_statements) on one connection.
 */
describe('vault pool: plan_cache_mode', () => {
  let db: FreshDatabase;
  beforeAll(async () => {
    db = await freshDatabase('plans');
    await migrate(db.url);
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function plansOf(
    plans: PlanCacheMode | undefined,
  ): Promise<{ mode: string; generic: number; custom: number }> {
    const pool = createVaultPool(db.runtime, {
      max: 1,
      applicationName: 'test-plans',
      ...(plans !== undefined ? { plans } : {}),
    });
    try {
      const vault = await openVault(pool);
      // An artifact lookup by Run id: an equality on the key, whose plan does not depend on it.
      for (let i = 0; i < 10; i++) expect(await vault.artifacts.get(randomUUID(), 'aibom')).toBeNull();
      const client: pg.PoolClient = await pool.connect();
      try {
        const mode = (await client.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode')).rows[0]!;
        const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(
          `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'artifacts_get'`,
        );
        expect(rows).toHaveLength(1);
        return {
          mode: mode.plan_cache_mode,
          generic: Number(rows[0]!.generic_plans),
          custom: Number(rows[0]!.custom_plans),
        };
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  }

  it('plans every call with its values by default', async () => {
    expect(await plansOf(undefined)).toEqual({ mode: 'force_custom_plan', generic: 0, custom: 10 });
  });

  it("lets PostgreSQL keep a generic plan with plans: 'auto', the controller's setting", async () => {
    expect(CONTROLLER_PLANS).toBe('auto');
    const auto = await plansOf(CONTROLLER_PLANS);
    expect(auto.mode).toBe('auto');
    expect(auto.generic).toBeGreaterThan(0);
    expect(auto.custom).toBeLessThan(10);
  });

  it('refuses a mode it does not know', () => {
    expect(() => createVaultPool(db.runtime, { plans: 'force_generic_plan' as PlanCacheMode })).toThrow(
      /plans must be one of custom, auto/,
    );
  });
});

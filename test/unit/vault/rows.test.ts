import { describe, expect, it } from 'vitest';
import { tileQuery, toWitnessRecord, type WitnessRow } from '../../../src/vault/tlog.ts';
import { runJobsOf, type RunJobRow } from '../../../src/vault/transparency-jobs.ts';

// Row mapping of the tlog and transparency-job repositories, apart from PostgreSQL (the queries
// run against a real one in test/integration/transparency/).

const none: Omit<WitnessRow, 'witness' | 'key_id'> = {
  c_size: null,
  c_at: null,
  c_stored: null,
  c_since: null,
  r_size: null,
  r_outcome: null,
  r_status: null,
  r_old: null,
  r_witness_size: null,
  r_detail: null,
  r_at: null,
};

describe('toWitnessRecord', () => {
  it('reads a witness with a cosignature and no refusal', () => {
    const at = new Date(1000);
    const rec = toWitnessRecord('vault', {
      ...none,
      witness: 'w',
      key_id: 'ab',
      c_size: '9007199254740991',
      c_at: at,
      c_stored: at,
      c_since: null,
    });
    expect(rec).toEqual({
      witness: 'w',
      keyId: 'ab',
      cosigned: { treeSize: Number.MAX_SAFE_INTEGER, cosignedAt: at, storedAt: at, since: null },
      refused: null,
    });
  });

  it('reads a refusal with its log, and defaults what the row left null', () => {
    const at = new Date(2000);
    const rec = toWitnessRecord('scitt', {
      ...none,
      witness: 'w',
      key_id: 'cd',
      r_size: '5',
      r_outcome: 'ahead',
      r_at: at,
    });
    expect(rec.cosigned).toBeNull();
    expect(rec.refused).toEqual({
      log: 'scitt',
      treeSize: 5,
      witness: 'w',
      keyId: 'cd',
      outcome: 'ahead',
      httpStatus: 0,
      oldSize: 0,
      witnessSize: null,
      detail: '',
      createdAt: at,
    });
  });

  it('takes a half-read side as absent rather than inventing its missing fields', () => {
    const rec = toWitnessRecord('vault', { ...none, witness: 'w', key_id: 'ef', c_size: '3', r_size: '4' });
    expect(rec.cosigned).toBeNull();
    expect(rec.refused).toBeNull();
  });
});

describe('tileQuery', () => {
  it('reads vault tiles from its node table at every level, SCITT leaves from the entries', () => {
    expect(tileQuery('vault', 0, 256, 256)).toMatchObject({ name: 'tlog_tile_vault', values: [0, 256, 256] });
    expect(tileQuery('vault', 8, 0, 3)).toMatchObject({ name: 'tlog_tile_vault', values: [8, 0, 3] });
    const leaves = tileQuery('scitt', 0, 512, 10);
    expect(leaves).toMatchObject({ name: 'tlog_tile_scitt_leaves', values: [512, 10] });
    expect(leaves.text).toContain('FROM scitt_log_entries');
    expect(tileQuery('scitt', 8, 1, 2)).toMatchObject({ name: 'tlog_tile_scitt', values: [8, 1, 2] });
    // One prepared-statement name, one text: the same name with other SQL fails on a connection.
    expect(tileQuery('scitt', 16, 0, 1).text).toBe(tileQuery('scitt', 8, 1, 2).text);
  });
});

function row(over: Partial<RunJobRow>): RunJobRow {
  return {
    run_namespace: 'ns',
    run_name: 'run',
    a_id: null,
    a_kind: null,
    id: null,
    attestation_id: null,
    state: null,
    attempts: null,
    last_error: null,
    next_attempt_at: null,
    lease_token: null,
    statement: null,
    entry_id: null,
    log_index: null,
    receipt: null,
    backend: null,
    published_at: null,
    created_at: null,
    updated_at: null,
    ...over,
  };
}

describe('runJobsOf', () => {
  it('is no run without rows, and a run without records from its lone row', () => {
    expect(runJobsOf([])).toEqual({ run: null, jobs: [], records: 0 });
    expect(runJobsOf([row({})])).toEqual({ run: { namespace: 'ns', name: 'run' }, jobs: [], records: 0 });
  });

  it('counts every record, lists only those with a job', () => {
    const t = new Date(0);
    const job = {
      id: 'j1',
      attestation_id: 'a1',
      state: 'published' as const,
      attempts: 1,
      next_attempt_at: t,
      log_index: '42',
      created_at: t,
      updated_at: t,
    };
    const got = runJobsOf([
      row({ a_id: 'a1', a_kind: 'step', ...job }),
      row({ a_id: 'a2', a_kind: 'aibom' }),
    ]);
    expect(got.records).toBe(2);
    expect(got.jobs).toHaveLength(1);
    expect(got.jobs[0]).toMatchObject({ attestationId: 'a1', kind: 'step', job: { id: 'j1', logIndex: 42 } });
  });
});

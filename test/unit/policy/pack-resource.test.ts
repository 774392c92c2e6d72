import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import type { RunSpec } from '../../../src/crd/run.ts';
import {
  BASELINE_GUARDRAILS,
  describeRetention,
  matchPackResource,
  parseRetention,
  retainUntil,
  runPolicyPack,
  type PolicyPackResource,
} from '../../../src/policy/index.ts';

const root = join(import.meta.dirname, '..', '..', '..');
const pack = (
  name: string,
  spec: Partial<PolicyPackResource['spec']> & { pack: string },
  created = '2026-01-01T00:00:00Z',
): PolicyPackResource => ({
  metadata: { name, creationTimestamp: created },
  spec: { minimumRetention: 'P1Y', notice: `notice of ${name}`, ...spec },
});

describe('minimum retention (ISO 8601 durations of calendar units)', () => {
  it('parses what the CRD admits and nothing else: the same pattern decides', () => {
    const crd = parse(readFileSync(join(root, 'crds/vault.service.dev_policypacks.yaml'), 'utf8')) as {
      spec: {
        versions: {
          schema: {
            openAPIV3Schema: { properties: { spec: { properties: Record<string, { pattern: string }> } } };
          };
        }[];
      };
    };
    const pattern = new RegExp(
      crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties.minimumRetention!.pattern,
    );
    const samples = [
      'P7Y',
      'P18M',
      'P90D',
      'P2W',
      'P1Y6M',
      'P1Y2M3W4D',
      'P0D',
      'P',
      'PT1H',
      'P1.5Y',
      '7Y',
      'P1D1Y',
      'P12345Y',
      ' P1Y',
      'p1y',
    ];
    for (const s of samples) {
      // The CRD's CEL rule refuses exactly 'P' beside the pattern.
      expect(parseRetention(s) !== undefined, s).toBe(pattern.test(s) && s !== 'P');
    }
    expect(parseRetention('P1Y2M3W4D')).toEqual({ years: 1, months: 2, weeks: 3, days: 4 });
    expect(describeRetention(parseRetention('P1Y6M')!)).toBe('1 year, 6 months');
    expect(describeRetention(parseRetention('P2W1D')!)).toBe('2 weeks, 1 day');
  });

  it('computes the keep-until day by calendar, clamping to the end of shorter months', () => {
    const d = (s: string) => new Date(`${s}T15:30:00Z`);
    expect(retainUntil(d('2026-11-24'), parseRetention('P1Y')!)).toBe('2027-11-24');
    expect(retainUntil(d('2028-02-29'), parseRetention('P1Y')!)).toBe('2029-02-28');
    expect(retainUntil(d('2026-01-31'), parseRetention('P1M')!)).toBe('2026-02-28');
    expect(retainUntil(d('2026-11-30'), parseRetention('P3M')!)).toBe('2027-02-28');
    expect(retainUntil(d('2026-12-31'), parseRetention('P90D')!)).toBe('2027-03-31');
    expect(retainUntil(d('2026-01-01'), parseRetention('P1Y1M1W1D')!)).toBe('2027-02-09');
  });
});

describe('which PolicyPack describes a pack', () => {
  const unversioned = pack('baseline', { pack: 'baseline' });
  const v2 = pack('baseline-2', { pack: 'baseline', version: '2' });
  const other = pack('strict', { pack: 'strict', version: '2' });

  it('prefers the resource of that exact version, else the one without a version, else none', () => {
    expect(matchPackResource({ name: 'baseline', version: '2' }, [unversioned, v2, other]).resource).toBe(v2);
    expect(matchPackResource({ name: 'baseline', version: '3' }, [unversioned, v2, other]).resource).toBe(
      unversioned,
    );
    expect(
      matchPackResource({ name: 'strict', version: '3' }, [unversioned, v2, other]).resource,
    ).toBeUndefined();
    expect(matchPackResource({ name: 'Baseline', version: '2' }, [unversioned, v2]).resource).toBeUndefined();
  });

  it('picks the oldest of resources claiming the same pack@version, whatever the list order, and names the others', () => {
    const older = pack('b-old', { pack: 'b', version: '1' }, '2025-01-01T00:00:00Z');
    const newer = pack('a-new', { pack: 'b', version: '1' }, '2026-01-01T00:00:00Z');
    for (const list of [
      [older, newer],
      [newer, older],
    ]) {
      expect(matchPackResource({ name: 'b', version: '1' }, list)).toEqual({
        resource: older,
        conflicting: ['a-new'],
      });
    }
  });
});

describe('a run against its pack (GET /v1/runs/{id} policy_pack)', () => {
  const spec = (policyPack?: RunSpec['policyPack']): RunSpec => ({
    ...(policyPack !== undefined ? { policyPack } : {}),
    steps: [{ id: 's', tool: { name: 't' } }],
  });

  it("lists the pack's guardrails the run does not declare", () => {
    const p = runPolicyPack(spec({ name: 'strict', version: '2', guardrails: ['b', 'a', 'x'] }), [
      pack('strict-2', {
        pack: 'strict',
        version: '2',
        guardrails: ['c', 'a', 'b', 'a'],
        minimumRetention: 'P7Y',
      }),
    ]);
    expect(p).toMatchObject({
      name: 'strict',
      version: '2',
      status: 'resolved',
      declared_guardrails: ['a', 'b', 'x'],
      missing_guardrails: ['c'],
      resource: {
        name: 'strict-2',
        guardrails: ['a', 'b', 'c'],
        minimum_retention: 'P7Y',
        minimum_retention_text: '7 years',
        notice: 'notice of strict-2',
      },
    });
  });

  it('tells a pack nobody describes from packs that could not be read', () => {
    expect(runPolicyPack(spec({ name: 'egress', version: '0.3.0' }), []).status).toBe('not_found');
    expect(runPolicyPack(spec({ name: 'egress', version: '0.3.0' }), undefined).status).toBe('unavailable');
  });

  it('takes the baseline guardrails the AIBOM records when a run declares none for baseline', () => {
    const p = runPolicyPack(spec(), [
      pack('baseline', { pack: 'baseline', guardrails: [...BASELINE_GUARDRAILS] }),
    ]);
    expect(p).toMatchObject({ name: 'baseline', version: 'unversioned', missing_guardrails: [] });
    expect(p.declared_guardrails).toEqual([...BASELINE_GUARDRAILS]);
  });

  it('the shipped baseline pack (manifests/policypacks/baseline.yaml) requires exactly BASELINE_GUARDRAILS', () => {
    const [doc] = parseAllDocuments(readFileSync(join(root, 'manifests/policypacks/baseline.yaml'), 'utf8'));
    const shipped = doc!.toJS() as PolicyPackResource & { kind: string };
    expect(shipped.kind).toBe('PolicyPack');
    expect(shipped.spec.pack).toBe('baseline');
    expect(shipped.spec.version).toBeUndefined();
    expect(shipped.spec.guardrails).toEqual([...BASELINE_GUARDRAILS]);
    expect(parseRetention(shipped.spec.minimumRetention)).toBeDefined();
    expect(shipped.spec.notice.length).toBeGreaterThan(0);
  });
});

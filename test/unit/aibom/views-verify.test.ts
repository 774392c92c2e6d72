/**
 * The offline check of recorded views (src/aibom/views/verify.ts), on views sealed the way the
 * recorder seals them: each way a view can be wrong is caught, and a right one passes.
 */
import { describe, expect, it } from 'vitest';
import { buildViews, verifyViews, type ViewFormat, type ViewPart } from '../../../src/aibom/views/index.ts';
import { sha256Hex } from '../../../src/attest/index.ts';
import { sealViews, viewMetadata } from '../../../src/recorder/views.ts';
import { madeRun, terminalRun } from '../../helpers/views.ts';
import { p256Signer } from '../attest/keys.ts';
import { fixtureRun } from './fixtures.ts';

const signer = p256Signer();
const spec = {
  ...fixtureRun().spec,
  // The fixture's principals as admission takes them (the recorder requires <type>:<name>).
  steps: fixtureRun().spec.steps.map((s) => ({
    ...s,
    ...(s.capabilities !== undefined
      ? { capabilities: s.capabilities.map((c) => ({ scope: c.scope, grantedBy: `team:${c.grantedBy}` })) }
      : {}),
  })),
};

function world() {
  const m = madeRun(terminalRun(spec), signer);
  const views = buildViews(m.input);
  const pack = { name: m.input.bom.metadata.policy_pack, version: m.input.bom.metadata.policy_pack_version };
  const sealed = sealViews(m.input.run as Parameters<typeof sealViews>[0], views, signer, pack).map(
    (r, i) => ({
      ...r,
      id: `0190f3a0-7c20-7000-9000-00000000000${i}`,
    }),
  );
  const metadata = viewMetadata(
    views,
    sealed.map((r) => r.id),
  );
  const parts: ViewPart[] = views.map((v, i) => ({ format: v.format, bytes: v.bytes, record: sealed[i] }));
  const records = new Map(m.records.map((r) => [r.id, r.digest]));
  const input = {
    bom: m.input.bom,
    aibomDigest: m.input.aibomDigest,
    views: metadata,
    parts,
    trust: { publicKeys: [signer.publicKey] },
    records,
    recordsComplete: true,
  };
  return { m, views, sealed, input };
}

const codes = (r: ReturnType<typeof verifyViews>) => r.problems.map((p) => p.code);

describe('verifyViews', () => {
  it('passes views that are what their records sign, recomputed byte for byte', () => {
    const { views, input } = world();
    const recomputed = new Map<ViewFormat, Buffer>(views.map((v) => [v.format, v.bytes]));
    const result = verifyViews({ ...input, recomputed });
    expect(result.problems).toEqual([]);
    expect(result.lines).toHaveLength(2);
    expect(result.lines[0]).toMatch(
      /^view {7}cyclonedx-1\.7 sha256:[0-9a-f]{64} signed by record .*recomputed byte for byte/,
    );
  });

  it('fails changed bytes, a swapped record, a missing view, a view of another AIBOM', () => {
    const { input } = world();
    const changed = Buffer.from(input.parts[1]!.bytes!);
    changed[changed.length - 3]! ^= 1;
    const c = verifyViews({ ...input, parts: [input.parts[0]!, { ...input.parts[1]!, bytes: changed }] });
    expect(codes(c)).toEqual(expect.arrayContaining(['VIEW_DIGEST_MISMATCH', 'VIEW_NOT_SIGNED']));

    const swapped = verifyViews({
      ...input,
      parts: [{ ...input.parts[0]!, record: input.parts[1]!.record }, input.parts[1]!],
    });
    expect(codes(swapped)).toEqual(expect.arrayContaining(['VIEW_RECORD_MISMATCH', 'VIEW_NOT_SIGNED']));

    expect(codes(verifyViews({ ...input, parts: [input.parts[0]!] }))).toEqual(['VIEW_MISSING']);

    const other = verifyViews({ ...input, aibomDigest: `sha256:${sha256Hex('another AIBOM')}` });
    expect(codes(other)).toEqual(['VIEW_OTHER_AIBOM', 'VIEW_OTHER_AIBOM']);

    const untrusted = verifyViews({ ...input, trust: { publicKeys: [p256Signer().publicKey] } });
    expect(codes(untrusted).every((c) => c.startsWith('VIEW_RECORD_'))).toBe(true);
    expect(codes(untrusted).length).toBeGreaterThan(0);
  });

  it('evidence: digests of the records at hand must match; absent ones only fail when all should be there', () => {
    const { m, input } = world();
    const forged = new Map(input.records);
    forged.set(m.records[0]!.id, `sha256:${'0'.repeat(64)}`);
    expect(codes(verifyViews({ ...input, records: forged }))).toEqual(['VIEW_EVIDENCE_NOT_IN_BUNDLE']);
    const partial = new Map([...input.records].slice(1));
    expect(codes(verifyViews({ ...input, records: partial, recordsComplete: false }))).toEqual([]);
    expect(codes(verifyViews({ ...input, records: partial, recordsComplete: true }))).toEqual([
      'VIEW_EVIDENCE_NOT_IN_BUNDLE',
    ]);
  });

  it('fails a view that is not what the records recompute', () => {
    const { input, views } = world();
    const recomputed = new Map<ViewFormat, Buffer>([[views[0]!.format, Buffer.from('{}')]]);
    expect(codes(verifyViews({ ...input, recomputed }))).toEqual(['VIEW_NOT_RECOMPUTED']);
  });
});

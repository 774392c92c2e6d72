/**
 * `service-ctl verify --aibom` (verifyAibomArtifact): the metadata record restates parts of the
 * signed AIBOM without signing them, so each restatement must match the signed bytes; an edited
 * record must not verify (a reviewer edited status, run_id, trust_subjects, summary, kind, the
 * manifest's ids and signature.algorithm of a fetched AIBOM, and verify said "AIBOM verified").
 */
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { verifyAibomArtifact } from '../../../src/aibom/verify.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import { runFixture, succeeded, world, type World } from '../controller/fixtures.ts';

let w: World;
let parts: { bytes: Buffer; manifest: Buffer; metadata: AibomMetadata };
let anchors: X509Certificate[];

beforeAll(async () => {
  w = await world();
  const run = runFixture(succeeded);
  await w.recorder.recordSteps(run, ['retrieve', 'summarise', 'post']);
  await w.recorder.recordTerminal(run);
  const { artifact } = await w.recorder.recordAibom(run);
  const metadata = artifact.metadata as unknown as AibomMetadata;
  parts = {
    bytes: w.blobs.objects.get(metadata.key)!.body,
    manifest: w.blobs.objects.get(metadata.c2pa_manifest.key)!.body,
    metadata,
  };
  anchors = [new X509Certificate(w.pki['ca.crt'])];
});

const codes = (metadata: unknown) =>
  verifyAibomArtifact({ ...parts, metadata }, anchors).problems.map((p) => p.code);
const edited = (edit: (m: Record<string, unknown>) => void): unknown => {
  const m = structuredClone(parts.metadata) as unknown as Record<string, unknown>;
  edit(m);
  return m;
};

describe('verify --aibom: the metadata record says what the signed AIBOM says', () => {
  it('verifies the record as stored', () => {
    expect(codes(parts.metadata)).toEqual([]);
  });

  it.each([
    [
      'status',
      (m: Record<string, unknown>) => (m.status = m.status === 'succeeded' ? 'failed' : 'succeeded'),
    ],
    ['run_id', (m: Record<string, unknown>) => (m.run_id = '0196a2b4-0000-7000-8000-000000000000')],
    ['kind', (m: Record<string, unknown>) => (m.kind = 'other')],
    ['trust_subjects', (m: Record<string, unknown>) => (m.trust_subjects = ['run:x'])],
    ['summary', (m: Record<string, unknown>) => ((m.summary as Record<string, unknown>).models = 99)],
    [
      'c2pa_manifest.attestation_ids',
      (m: Record<string, unknown>) => ((m.c2pa_manifest as Record<string, unknown>).attestation_ids = []),
    ],
    [
      'signature.algorithm',
      (m: Record<string, unknown>) => ((m.signature as Record<string, unknown>).algorithm = 'bogus'),
    ],
  ])('an edited %s does not verify', (_field, edit) => {
    expect(codes(edited(edit))).toContain('METADATA_MISMATCH');
  });

  it('key order in the record does not matter', () => {
    const reversed = edited((m) => {
      const s = m.summary as Record<string, unknown>;
      m.summary = Object.fromEntries(Object.entries(s).reverse());
    });
    expect(codes(reversed)).toEqual([]);
  });
});

/**
 * The recorder (extract → sign → store) against in-memory repositories and object store, with
 * real keys: each method records once per key, signs with the right key, and says which dependency
 * a failure was on.
 */
import { describe, expect, it } from 'vitest';
import { aibomRunOf } from '../../../src/aibom/index.ts';
import { serializeView, VIEW_FORMAT_NAMES } from '../../../src/aibom/views/index.ts';
import { canonicalJson, sha256Hex, verifyRecord } from '../../../src/attest/index.ts';
import { verifyManifest } from '../../../src/c2pa/index.ts';
import {
  aibomKeys,
  computeAibomViews,
  RecordError,
  stepKey,
  terminalKey,
  type AibomMetadata,
} from '../../../src/recorder/index.ts';
import { runFixture, stepsDone, succeeded, world } from '../controller/fixtures.ts';

describe('recorder', () => {
  it('records finished steps once per key: capability tokens, the step they authorise, its output artifact', async () => {
    const w = await world();
    const run = runFixture(stepsDone(3));
    const first = await w.recorder.recordSteps(run, ['retrieve', 'summarise']);
    expect(first.map((r) => [r.key, r.what, r.ids.length, r.created])).toEqual([
      [stepKey(run.metadata.uid, 'retrieve'), 'step retrieve', 3, true],
      [stepKey(run.metadata.uid, 'summarise'), 'step summarise', 2, true],
    ]);
    const [capability, step, output] = w.vault.rows;
    expect(capability!.kind).toBe('capability');
    expect(step!.record.capabilityTokenIds).toEqual(capability!.record.capabilityTokenIds);
    // The output's artifact record: named by the step, its subject digest the step's outputDigest.
    expect(output!.kind).toBe('artifact');
    expect(output!.record).toMatchObject({
      stepId: 'retrieve',
      subjects: [`artifact:${run.metadata.uid}:steps/retrieve/output`],
      artifactDigests: [`sha256:${sha256Hex(Buffer.from(canonicalJson(run.status!.steps![0]!.output)))}`],
    });
    const stepPredicate = (
      JSON.parse(Buffer.from(step!.record.envelope.payload, 'base64').toString('utf8')) as {
        predicate: { outputDigest: { sha256: string } };
      }
    ).predicate;
    expect(output!.record.artifactDigests).toEqual([`sha256:${stepPredicate.outputDigest.sha256}`]);
    for (const row of w.vault.rows) {
      expect(verifyRecord(row.record, { publicKeys: [w.signer.publicKey] }).ok).toBe(true);
    }
    // Again (a retry, a racing replica): the stored ids, nothing new.
    const again = await w.recorder.recordSteps(run, ['retrieve']);
    expect(again).toEqual([{ ...first[0], created: false }]);
    expect(w.vault.rows).toHaveLength(5);
    // Only finished steps: an unfinished one asked for is skipped.
    expect(await w.recorder.recordSteps(runFixture(stepsDone(0)), ['retrieve'])).toEqual([]);
  });

  it('records nothing of a step whose chain widens a scope (a Run admitted before the CRD checked it)', async () => {
    const w = await world();
    const run = runFixture(stepsDone(3));
    run.spec.steps[0]!.capabilities = [
      {
        scope: 'kb',
        grantedBy: 'team:platform',
        delegatedFrom: [{ scope: 'kb:read', grantedBy: 'org:acme' }],
      },
    ];
    await expect(w.recorder.recordSteps(run, ['retrieve'])).rejects.toMatchObject({
      code: 'CapabilityChainInvalid',
      message: expect.stringContaining('step retrieve: link 1: team:platform grants kb') as unknown,
    });
    run.spec.steps[0]!.capabilities = [{ scope: 'kb:read', grantedBy: 'team:platform', approvedBy: 'alice' }];
    await expect(w.recorder.recordSteps(run, ['retrieve'])).rejects.toBeInstanceOf(RecordError);
    expect(w.vault.rows).toEqual([]);
  });

  it('records the terminal batch: one policy record per pack in use, then the provenance', async () => {
    const w = await world();
    const run = runFixture(succeeded);
    const r = await w.recorder.recordTerminal(run);
    expect(r).toMatchObject({ key: terminalKey(run.metadata.uid), what: 'run and policies', created: true });
    expect(w.vault.rows.map((x) => [x.kind, x.record.policyPack, x.record.policyVersion])).toEqual([
      ['policy', 'baseline', '1.2.0'],
      ['policy', 'strict', '2'],
      ['run', 'baseline', '1.2.0'],
    ]);
    expect((await w.recorder.recordTerminal(run)).created).toBe(false);
  });

  it('dates the provenance by instants, whatever UTC offsets the pipeline wrote', async () => {
    const w = await world();
    // Text order and time order disagree: 10:00+02:00 (08:00Z) is the earliest start, 09:30Z the
    // latest finish although "09:30:00Z" sorts before "10:59:00+05:00" (05:59Z).
    const run = runFixture(succeeded, (r) => {
      const [a, b, c] = r.status!.steps!;
      Object.assign(a!, { startedAt: '2026-03-01T09:00:00Z', finishedAt: '2026-03-01T09:10:00Z' });
      Object.assign(b!, { startedAt: '2026-03-01T10:00:00+02:00', finishedAt: '2026-03-01T10:59:00+05:00' });
      Object.assign(c!, { startedAt: '2026-03-01T09:20:00Z', finishedAt: '2026-03-01T09:30:00Z' });
    });
    await w.recorder.recordTerminal(run);
    const provenance = w.vault.rows.find((x) => x.kind === 'run')!;
    const statement = JSON.parse(
      Buffer.from(provenance.record.envelope.payload, 'base64').toString('utf8'),
    ) as {
      predicate: { runDetails: { metadata: { startedOn: string; finishedOn: string } } };
    };
    expect(statement.predicate.runDetails.metadata).toMatchObject({
      startedOn: '2026-03-01T10:00:00+02:00',
      finishedOn: '2026-03-01T09:30:00Z',
    });
  });

  it('records the AIBOM once: bytes, C2PA sidecar and metadata beside it, its attestation last', async () => {
    const w = await world({ transparency: true });
    const run = runFixture(succeeded);
    await w.recorder.recordSteps(run, ['retrieve', 'summarise', 'post']);
    await w.recorder.recordTerminal(run);
    const { artifact, created } = await w.recorder.recordAibom(run);
    expect(created).toBe(true);
    const meta = artifact.metadata as unknown as AibomMetadata;
    // The AIBOM record comes after every record it lists.
    const at = w.vault.rows.findIndex((r) => r.kind === 'aibom');
    expect(meta.attestation_ids).toEqual(w.vault.rows.slice(0, at).map((r) => r.id));
    const aibomRow = w.vault.rows[at]!;
    expect(meta.aibom_attestation_id).toBe(aibomRow.id);
    // Then its two standard views, then the artifact record of its blob, last.
    expect(w.vault.rows).toHaveLength(at + 4);
    const viewRows = w.vault.rows.slice(at + 1, at + 3);
    const blobRow = w.vault.rows[at + 3]!;
    expect(blobRow.kind).toBe('artifact');
    expect(blobRow.record).toMatchObject({
      subjects: [`artifact:${run.metadata.uid}:aibom`],
      artifactDigests: [meta.digest],
    });
    expect(viewRows.map((r) => [r.kind, r.predicateType, r.subjects])).toEqual([
      ['artifact', 'https://cyclonedx.org/bom', [`artifact:${run.metadata.uid}:aibom.cdx-1.7.json`]],
      ['artifact', 'https://spdx.dev/Document/v3', [`artifact:${run.metadata.uid}:aibom.spdx-3.0.1.json`]],
    ]);
    expect(VIEW_FORMAT_NAMES.map((f) => meta.views?.[f]?.attestation_id)).toEqual(viewRows.map((r) => r.id));
    // Each view record signs the view the CLI recomputes from the vault, byte for byte, and its
    // subject digest is that of those bytes.
    const { views } = await computeAibomViews(w.vault.attestations, aibomRunOf(run));
    for (const [i, row] of viewRows.entries()) {
      // A vault record like any other: signature, labels, predicate schema of its type.
      expect(verifyRecord(row.record, { publicKeys: [w.signer.publicKey] }).problems).toEqual([]);
      const statement = JSON.parse(Buffer.from(row.envelope.payload, 'base64').toString()) as {
        subject: { digest: { sha256: string } }[];
        predicate: unknown;
      };
      expect(serializeView(statement.predicate).equals(views[i]!.bytes)).toBe(true);
      expect(`sha256:${statement.subject[0]!.digest.sha256}`).toBe(views[i]!.digest);
      expect(meta.views?.[views[i]!.format]?.digest).toBe(views[i]!.digest);
    }
    expect(aibomRow.record.c2paManifestRef).toBe(`s3://${w.blobs.bucket}/${meta.c2pa_manifest.key}`);
    const bytes = w.blobs.objects.get(meta.key)!.body;
    const manifest = w.blobs.objects.get(meta.c2pa_manifest.key)!.body;
    const verified = verifyManifest({ store: manifest, asset: bytes, trustAnchors: w.pki['ca.crt'] });
    expect(verified.problems).toEqual([]);
    expect(verified.attestationIds).toEqual(meta.attestation_ids);
    // Every record's SCITT job commits with it when the writer is on.
    expect([...w.vault.jobs.keys()].sort()).toEqual(w.vault.rows.map((r) => r.id).sort());
    // The metadata beside the blob shows the AIBOM's entry `queued` with its job id from the start
    // (issue 10 item 5: it used to appear only in the API's view, joined at read time).
    const metaKey = aibomKeys(run.metadata.namespace, run.metadata.uid).meta;
    const job = w.vault.jobs.get(aibomRow.id)!;
    const expected = {
      ...meta,
      transparency: {
        job_id: job.id,
        status: 'queued',
        attempts: 0,
        next_attempt_at: job.nextAttemptAt.toISOString(),
      },
    };
    expect(JSON.parse(w.blobs.objects.get(metaKey)!.body.toString())).toEqual(expected);

    // Again: the stored record, no new object, no new row.
    const puts = w.blobs.writes.total();
    const again = await w.recorder.recordAibom(run);
    expect(again).toEqual({ artifact, created: false });
    expect(w.blobs.writes.total()).toBe(puts);

    // The metadata object beside the blob lost (a crash after the commit): the next call repairs it.
    w.blobs.objects.delete(metaKey);
    await w.recorder.recordAibom(run);
    expect(JSON.parse(w.blobs.objects.get(metaKey)!.body.toString())).toEqual(expected);
  });

  it('says which dependency failed: the vault, the object store, the signer', async () => {
    const w = await world();
    const run = runFixture(succeeded);
    w.vault.failNext = new Error('ECONNRESET');
    const vault = await w.recorder.recordTerminal(run).catch((e: unknown) => e);
    expect(vault).toBeInstanceOf(RecordError);
    expect(vault).toMatchObject({ code: 'VaultUnavailable', message: 'ECONNRESET' });
    expect((vault as RecordError).cause).toBeInstanceOf(Error);

    w.blobs.failNext = new Error('503');
    expect(await w.recorder.recordAibom(run).catch((e: unknown) => e)).toMatchObject({
      code: 'ObjectStoreUnavailable',
    });

    w.signerDown = true;
    expect(await w.recorder.recordSteps(run, ['retrieve']).catch((e: unknown) => e)).toMatchObject({
      code: 'SignerUnavailable',
    });
    expect(w.vault.rows.filter((r) => r.kind === 'step')).toHaveLength(0);
  });
});

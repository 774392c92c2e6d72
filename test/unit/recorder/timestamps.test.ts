/**
 * The recorder with a time-stamping authority (a fake `Timestamper`: the RFC 3161 client itself is
 * tested against the real TSA in test/integration/timestamp) and with a signer that rotates: what
 * the AIBOM metadata records, what happens when the TSA fails, which key signs what, and that the
 * signer history gets each certificate before the first record signed with it.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { parseClaimSignature, sigTstOf } from '../../../src/c2pa/claim-signature.ts';
import { childSuperBoxes, contentBoxes, parseJumbf, Uuids } from '../../../src/c2pa/jumbf.ts';
import { createRecorder, RecordError, type AibomMetadata } from '../../../src/recorder/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { TimestampError, type Timestamper, type VerifiedTimestamp } from '../../../src/timestamp/index.ts';
import type { NewSignerCertificate } from '../../../src/vault/index.ts';
import { FakeBlobs, FakeVault } from '../../helpers/fakes.ts';
import { generateDevPki } from '../../helpers/pki.ts';
import { runFixture, succeeded } from '../controller/fixtures.ts';

const logger = pino({ level: 'silent' });
const GEN_TIME = new Date('2026-03-01T11:00:05Z');

/** Answers every request with a distinct fake response; remembers what it was asked to stamp. */
function fakeTsa(signer: KeySigner, fail?: TimestampError): Timestamper & { asked: Buffer[] } {
  const asked: Buffer[] = [];
  return {
    url: 'http://tsa.test/',
    asked,
    timestamp(data) {
      asked.push(Buffer.from(data));
      if (fail) return Promise.reject(fail);
      const stamp: VerifiedTimestamp = {
        genTime: GEN_TIME,
        policy: '1.2.3',
        serial: asked.length.toString(16),
        hashAlgorithm: 'sha256',
        imprint: Buffer.alloc(32),
        response: Buffer.from(`response #${asked.length}`),
        token: Buffer.from(`token #${asked.length}`),
        // Any certificate: the recorder copies only `tsa` and `response`.
        tsaCertificate: signer.certificateChain![0]!,
        tsa: 'CN=test TSA',
      };
      return Promise.resolve(stamp);
    },
  };
}

/** The FakeVault plus an in-memory signer history, in the order certificates were recorded. */
class HistoryVault extends FakeVault {
  readonly history: NewSignerCertificate[] = [];
  readonly signers = {
    record: (c: NewSignerCertificate): Promise<void> => {
      // Recorded before any record signed with it: nothing of its key may be in the vault yet.
      const before = this.rows.filter((r) => r.record.signature.cert_chain_ref === c.certRef);
      if (before.length > 0) throw new Error(`${c.certRef} recorded after ${before.length} records`);
      if (!this.history.some((h) => h.certRef === c.certRef && h.namespace === c.namespace)) {
        this.history.push(c);
      }
      return Promise.resolve();
    },
  };
}

async function setup(opts: { tsa?: (s: KeySigner) => Timestamper; customer?: boolean } = {}) {
  const [a, b, c] = await Promise.all([generateDevPki(), generateDevPki(), generateDevPki()]);
  const signers = { a: signerFromPem(a), b: signerFromPem(b), customer: signerFromPem(c) };
  let current: KeySigner = signers.a;
  const vault = new HistoryVault();
  const blobs = new FakeBlobs();
  const tsa = opts.tsa?.(signers.a);
  const recorder = createRecorder({
    vault,
    blobs,
    runtimeSigner: () => current,
    signers: vault.signers,
    envelopeSigner: () =>
      Promise.resolve(
        opts.customer
          ? { signer: signers.customer, authority: 'namespace' as const }
          : { signer: current, authority: 'service' as const },
      ),
    ...(tsa ? { timestamper: tsa } : {}),
    logger,
  });
  return {
    vault,
    blobs,
    recorder,
    signers,
    tsa,
    rotate: (to: KeySigner) => {
      current = to;
    },
  };
}

const sigTstOfStore = (store: Buffer): Buffer | undefined => {
  // The active manifest's signature box, read as JUMBF (searching the bytes for the COSE_Sign1 tag
  // from the end found it inside the signature itself once in a few hundred runs).
  const manifest = childSuperBoxes(parseJumbf(store)).at(-1)!;
  const signature = childSuperBoxes(manifest).find((b) => b.uuid.equals(Uuids.signature))!;
  const cbor = contentBoxes(signature).find((c) => c.type === 'cbor')!.payload;
  return sigTstOf(parseClaimSignature(cbor).sign1);
};

describe('recorder with a TSA', () => {
  it('time-stamps the runtime signature and the C2PA claim; the metadata records both beside what they cover', async () => {
    const t = await setup({ tsa: (s) => fakeTsa(s) });
    const run = runFixture(succeeded);
    await t.recorder.recordTerminal(run);
    const { artifact } = await t.recorder.recordAibom(run);
    const meta = artifact.metadata as unknown as AibomMetadata;
    const tsa = t.tsa as ReturnType<typeof fakeTsa>;
    expect(tsa.asked).toHaveLength(2);
    // One of the two time-stamps is over the runtime signature bytes, exactly.
    const signature = Buffer.from(meta.signature.signature, 'base64');
    expect(tsa.asked.some((d) => d.equals(signature))).toBe(true);
    const which = tsa.asked.findIndex((d) => d.equals(signature)) + 1;
    expect(meta.signature).toMatchObject({
      algorithm: 'ECDSA_P256_SHA256',
      key_id: t.signers.a.keyId,
      timestamp: {
        time: GEN_TIME.toISOString(),
        tsa: 'CN=test TSA',
        signed_timestamp: Buffer.from(`response #${which}`).toString('base64'),
      },
    });
    expect(meta.c2pa_manifest.timestamp).toEqual({ time: GEN_TIME.toISOString(), tsa: 'CN=test TSA' });
    // The other response is the manifest's sigTst.
    const store = t.blobs.objects.get(meta.c2pa_manifest.key)!.body;
    expect(sigTstOfStore(store)?.toString()).toBe(`response #${3 - which}`);
  });

  it('TSA down: TimestampUnavailable and nothing written; a Run being deleted is recorded without time-stamps', async () => {
    const down = new TimestampError('TSA_UNAVAILABLE', 'no time-stamp within 1000 ms');
    const t = await setup({ tsa: (s) => fakeTsa(s, down) });
    const run = runFixture(succeeded);
    await t.recorder.recordTerminal(run);
    const rows = t.vault.rows.length;
    const puts = t.blobs.writes.total();
    const err = await t.recorder.recordAibom(run).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RecordError);
    expect(err).toMatchObject({ code: 'TimestampUnavailable' });
    expect((err as RecordError).cause).toBe(down);
    expect(t.vault.rows).toHaveLength(rows);
    expect(t.blobs.writes.total()).toBe(puts);

    const deleting = { ...run, metadata: { ...run.metadata, deletionTimestamp: '2026-03-01T12:00:00Z' } };
    const { artifact, created } = await t.recorder.recordAibom(deleting);
    expect(created).toBe(true);
    const meta = artifact.metadata as unknown as AibomMetadata;
    expect(meta.signature.timestamp).toBeUndefined();
    expect(meta.c2pa_manifest.timestamp).toBeUndefined();
    expect(sigTstOfStore(t.blobs.objects.get(meta.c2pa_manifest.key)!.body)).toBeUndefined();
  });

  it('a wrong answer (another imprint) is not a time-stamp either: TimestampUnavailable', async () => {
    const wrong = new TimestampError('IMPRINT_MISMATCH', 'the time-stamp token was issued for other data');
    const t = await setup({ tsa: (s) => fakeTsa(s, wrong) });
    const run = runFixture(succeeded);
    await t.recorder.recordTerminal(run);
    expect(await t.recorder.recordAibom(run).catch((e: unknown) => e)).toMatchObject({
      code: 'TimestampUnavailable',
    });
  });
});

describe('recorder with a rotating signer', () => {
  it('signs with the signer of the moment, and records each certificate in the history first', async () => {
    const t = await setup();
    const first = runFixture(succeeded);
    await t.recorder.recordSteps(first, ['retrieve']);
    t.rotate(t.signers.b);
    const second = runFixture(succeeded);
    await t.recorder.recordSteps(second, ['retrieve']);
    await t.recorder.recordTerminal(second);
    const { artifact } = await t.recorder.recordAibom(second);
    const keys = t.vault.rows.map((r) => [r.record.runId, r.record.signature.key_id]);
    expect(keys).toEqual([
      ...keys.filter(([id]) => id === first.metadata.uid).map(([id]) => [id, t.signers.a.keyId]),
      ...keys.filter(([id]) => id === second.metadata.uid).map(([id]) => [id, t.signers.b.keyId]),
    ]);
    expect((artifact.metadata as unknown as AibomMetadata).signature.key_id).toBe(t.signers.b.keyId);
    expect(t.vault.history.map((h) => [h.keyId, h.namespace])).toEqual([
      [t.signers.a.keyId, ''],
      [t.signers.b.keyId, ''],
    ]);
    expect(t.vault.history[1]!.chainPem).toContain('BEGIN CERTIFICATE');
    expect(t.vault.history[1]!.caPem).toContain('BEGIN CERTIFICATE');
  });

  it("a tenant's own key goes into the history under its namespace", async () => {
    const t = await setup({ customer: true });
    const run = runFixture(succeeded);
    await t.recorder.recordSteps(run, ['retrieve']);
    expect(t.vault.history.map((h) => [h.keyId, h.namespace])).toEqual([
      [t.signers.customer.keyId, run.metadata.namespace],
    ]);
  });
});

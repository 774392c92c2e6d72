import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../hack/stack/proc.ts';
import { verifyRecord, type Trust } from '../../../src/attest/index.ts';
import { signerEntry } from '../../../src/export/keys.ts';
import { toApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  createTsaClient,
  dsseSignatureBytes,
  verifyDsseSignatureTimestamp,
  type Timestamper,
} from '../../../src/timestamp/index.ts';
import { createStamper, type Stamper } from '../../../src/timestamp/stamper.ts';
import { createVaultPool, openVault, type StoredAttestation, type Vault } from '../../../src/vault/index.ts';
import { generateDevPki, type DevPki } from '../../helpers/pki.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabaseLogins, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';

/**
 * Records are time-stamped right after they are stored (docs/adr/0015): the append commits a job
 * with the records, the stamper (woken by the vault's notification, as the runtime role) takes an
 * RFC 3161 time-stamp from the stack's real TSA over each envelope's signature and stores it;
 * reads and the API carry it, and the verifier judges the certificate at its time. A TSA that is
 * down holds nothing and loses nothing; a certificate that expired before a time-stamp could be
 * taken leaves the record without one. Time-stamps over other bytes, outside the certificate's
 * validity or from an untrusted TSA are refused with a code.
 */
let vault: Vault;
let tsa: Timestamper;
let tsaCa: X509Certificate;
let pki: DevPki;
let signer: KeySigner;
const running: { stop: AbortController; done: Promise<void> }[] = [];
let proxy: Server | undefined;

/** A stamper over the test's vault (as the runtime role), with the vault's listener unless `quiet`. */
function stamperOf(
  extra: Partial<Parameters<typeof createStamper>[0]> & { tsa: Timestamper },
  quiet = false,
): Stamper {
  return createStamper({
    timestamps: vault.timestamps,
    attestations: vault.attestations,
    signers: vault.signers,
    ...(quiet ? {} : { listener: vault.listener }),
    ...extra,
  });
}

function start(stamper: Stamper): void {
  const stop = new AbortController();
  running.push({ stop, done: stamper.run(stop.signal) });
}

async function stopAll(): Promise<void> {
  for (const r of running.splice(0)) {
    r.stop.abort();
    await r.done;
  }
}

/** Stores the records of one run (signed by `by`), with time-stamp jobs; returns them as stored. */
async function store(by: KeySigner, namespace: string): Promise<StoredAttestation[]> {
  await vault.signers.record(signerEntry(by, { namespace: '', role: 'signer' }));
  return vault.attestations.append(runRecords(by, namespace).records, { enqueueTimestamps: true });
}

const stamped = (ids: readonly string[]) =>
  waitFor(`time-stamps of ${ids.length} record(s)`, async () => {
    const got = await vault.attestations.getMany(ids);
    const all = ids.map((id) => got.get(id));
    return all.every((r) => r?.timestamp !== undefined) ? (all as StoredAttestation[]) : undefined;
  });

const chainTrust = (p: DevPki, tsaTrustAnchors?: X509Certificate[]): Trust => {
  const s = signerFromPem(p, { at: new X509Certificate(p['tls.crt']).validFromDate });
  return {
    certificateChain: s.certificateChain!,
    trustAnchors: s.caCertificates,
    ...(tsaTrustAnchors !== undefined ? { tsaTrustAnchors } : {}),
  };
};

beforeAll(async () => {
  const db = await freshDatabaseLogins('tsrec');
  // The runtime login, as the controller runs: the stamper only moves jobs through functions.
  vault = await openVault(createVaultPool(db.runtime));
  tsaCa = new X509Certificate(await readFile(stack().env.TSA_TRUST_ANCHORS!));
  tsa = createTsaClient({ url: stack().env.TSA_URL!, trustAnchors: [tsaCa], deadlineMs: 20_000 });
  pki = await generateDevPki();
  signer = signerFromPem(pki);
});

afterAll(async () => {
  await stopAll();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  await vault?.close();
});

describe('records are time-stamped after they are stored', () => {
  it('the stamper, woken by the append, stores a time-stamp over each signature; reads and the API carry it', async () => {
    start(stamperOf({ tsa }));
    const records = await store(signer, uniqueName('tsrec'));
    // Appended and returned before any time-stamp: the record never waits for the TSA.
    expect(records.every((r) => r.timestamp === undefined)).toBe(true);
    // The listener is connected, so the stamper sleeps until woken: only the append's NOTIFY wakes it.
    const after = await stamped(records.map((r) => r.id));
    for (const r of after) {
      const t = verifyDsseSignatureTimestamp(
        r.envelope,
        { signedTimestamp: r.timestamp!.response.toString('base64') },
        [tsaCa],
      );
      expect(t.genTime).toEqual(r.timestamp!.genTime);
      expect(t.genTime.getTime()).toBeGreaterThanOrEqual(r.createdAt.getTime() - 5_000);
      expect(r.timestamp!.tsa).toContain('time-stamping authority');
      expect((await vault.timestamps.job(r.id))?.state).toBe('done');
      const view = toApiEnvelope(r);
      expect(view.signature.timestamp).toEqual({
        time: r.timestamp!.genTime.toISOString(),
        tsa: r.timestamp!.tsa,
        signed_timestamp: r.timestamp!.response.toString('base64'),
      });
      // The verifier judges the certificate at the time-stamp's time, and says so.
      const result = verifyRecord(view, chainTrust(pki, [tsaCa]));
      expect(result.problems).toEqual([]);
      expect(result.timestamp).toMatchObject({ trusted: true, time: t.genTime });
      expect(result.checkedAt).toEqual(t.genTime);
    }
    // A stored time-stamp never changes, by any role.
    const again = await vault.attestations.get(after[0]!.id);
    expect(again?.timestamp?.response.equals(after[0]!.timestamp!.response)).toBe(true);
  });

  it('refuses a time-stamp over other bytes, from an untrusted TSA, or outside the certificate validity, each with its code', async () => {
    const [a, b] = await stamped((await store(signer, uniqueName('tsrec'))).map((r) => r.id));
    const viewA = toApiEnvelope(a!) as unknown as Record<string, unknown>;
    const viewB = toApiEnvelope(b!) as unknown as { signature: Record<string, unknown> };
    // B's time-stamp presented on A: its imprint is B's signature.
    const swapped = {
      ...viewA,
      signature: { ...(viewA.signature as object), timestamp: viewB.signature.timestamp },
    };
    expect(verifyRecord(swapped, chainTrust(pki, [tsaCa])).problems.map((p) => p.code)).toContain(
      'TIMESTAMP_IMPRINT_MISMATCH',
    );
    // A TSA chaining to another root is not trusted.
    const otherRoot = new X509Certificate((await generateDevPki())['ca.crt']);
    const untrusted = verifyRecord(viewA, chainTrust(pki, [otherRoot]));
    expect(untrusted.problems.map((p) => p.code)).toEqual(['TIMESTAMP_UNTRUSTED_TSA']);
    // Without TSA anchors, the time-stamp is not checked and the certificate is judged now.
    const blind = verifyRecord(viewA, chainTrust(pki));
    expect(blind.ok).toBe(true);
    expect(blind.timestamp).toMatchObject({ trusted: false, reason: 'no TSA trust anchor was given' });

    // A signer whose certificate expired an hour ago signs; a real TSA time-stamps that signature
    // now: the time-stamp proves it was made outside the certificate's validity.
    const expired = await generateDevPki({
      caNotBefore: new Date(Date.now() - 3 * 3600_000),
      notBefore: new Date(Date.now() - 2 * 3600_000),
      notAfter: new Date(Date.now() - 3600_000),
    });
    // Loaded as of when it was valid (the loader refuses an expired chain at load time).
    const old = signerFromPem(expired, { at: new Date(Date.now() - 1.5 * 3600_000) });
    const [record] = runRecords(old, 'team-x').records;
    const token = await tsa.timestamp(dsseSignatureBytes(record!.envelope));
    const late = {
      ...record!,
      digest: record!.digest,
      signature: {
        ...record!.signature,
        timestamp: {
          time: token.genTime.toISOString(),
          tsa: token.tsa,
          signed_timestamp: token.response.toString('base64'),
        },
      },
    };
    const outside = verifyRecord(late, chainTrust(expired, [tsaCa]));
    expect(outside.problems.map((p) => p.code)).toEqual(['TIMESTAMP_OUTSIDE_VALIDITY']);
    // And a time-stamp whose stated time is not the token's is a mismatch.
    const lying = {
      ...viewA,
      signature: {
        ...(viewA.signature as Record<string, unknown>),
        timestamp: {
          ...((viewA.signature as Record<string, unknown>).timestamp as object),
          time: '2020-01-01T00:00:00.000Z',
        },
      },
    };
    expect(verifyRecord(lying, chainTrust(pki, [tsaCa])).problems.map((p) => p.code)).toEqual([
      'RECORD_MISMATCH',
    ]);
  });

  it('leaves a record without a time-stamp when its certificate expired before one could be taken', async () => {
    const expired = signerFromPem(
      await generateDevPki({
        caNotBefore: new Date(Date.now() - 3 * 3600_000),
        notBefore: new Date(Date.now() - 2 * 3600_000),
        notAfter: new Date(Date.now() - 3600_000),
      }),
      { at: new Date(Date.now() - 1.5 * 3600_000) },
    );
    const stamper = stamperOf({ tsa }, true);
    const records = await store(expired, uniqueName('tsrec'));
    // The running stamper may take them first; either way each ends failed, none stamped.
    const jobs = await waitFor('the jobs to settle', async () => {
      await stamper.drainOnce();
      const all = await Promise.all(records.map((r) => vault.timestamps.job(r.id)));
      return all.every((j) => j?.state === 'failed') ? all : undefined;
    });
    for (const j of jobs) expect(j!.lastError).toMatch(/^OUTSIDE_VALIDITY: the signer certificate expired/);
    for (const r of records) expect(await vault.timestamps.get(r.id)).toBeNull();
  });
});

describe('the TSA is down, then back', () => {
  it('records are stored at once; their jobs are retried with backoff and time-stamped once the TSA answers', async () => {
    await stopAll();
    const port = await freePort();
    const down = createTsaClient({
      url: `http://127.0.0.1:${port}/api/v1/timestamp`,
      trustAnchors: [tsaCa],
      deadlineMs: 500,
    });
    start(stamperOf({ tsa: down, policy: { baseDelayMs: 200, maxDelayMs: 1_000 } }));
    const records = await store(signer, uniqueName('tsrec'));
    const ids = records.map((r) => r.id);
    // Retried, not lost: each job is queued again with the TSA's failure, attempt after attempt.
    await waitFor('two failed attempts per job', async () => {
      const jobs = await Promise.all(ids.map((id) => vault.timestamps.job(id)));
      return jobs.every(
        (j) => j?.state === 'queued' && j.attempts >= 2 && /TSA_UNAVAILABLE/.test(j.lastError ?? ''),
      )
        ? jobs
        : undefined;
    });
    const readable = await vault.attestations.getMany(ids);
    expect([...readable.values()].every((r) => r.timestamp === undefined)).toBe(true);
    expect(readable.size).toBe(ids.length);

    // The TSA comes back on that port (a forwarder to the stack's real one).
    proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void fetch(stack().env.TSA_URL!, {
          method: 'POST',
          headers: { 'content-type': 'application/timestamp-query' },
          body: Buffer.concat(chunks),
        }).then(async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? '' });
          res.end(Buffer.from(await r.arrayBuffer()));
        });
      });
    });
    await new Promise<void>((r) => proxy!.listen(port, '127.0.0.1', r));
    const after = await stamped(ids);
    expect(after.map((r) => r.id)).toEqual(ids);
    for (const id of ids) expect((await vault.timestamps.job(id))?.state).toBe('done');
  });
});

describe('several stampers (replicas)', () => {
  it('claim with SKIP LOCKED: every record is time-stamped exactly once', async () => {
    await stopAll();
    for (let i = 0; i < 3; i++) start(stamperOf({ tsa, batchSize: 4 }));
    const batches = await Promise.all(Array.from({ length: 8 }, () => store(signer, uniqueName('tsrec'))));
    const ids = batches.flat().map((r) => r.id);
    const after = await stamped(ids);
    expect(after).toHaveLength(24);
    const jobs = await Promise.all(ids.map((id) => vault.timestamps.job(id)));
    // One successful claim each: nobody stamped a record another stamper held.
    expect(jobs.every((j) => j?.state === 'done' && j.attempts === 1)).toBe(true);
    expect(await vault.timestamps.stats()).toMatchObject({ queued: 0 });
  });
});

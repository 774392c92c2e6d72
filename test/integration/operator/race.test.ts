import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { aibomRunOf } from '../../../src/aibom/index.ts';
import { isFinished, type Run, type RunSpec, type StepStatus } from '../../../src/crd/run.ts';
import { verifyManifest } from '../../../src/c2pa/index.ts';
import { driveRun } from '../../../hack/sample-pipeline.ts';
import { aibomKeys, recordAibom, type AibomDeps, type AibomMetadata } from '../../../src/recorder/aibom.ts';
import { stepBatch, terminalBatch } from '../../../src/recorder/extract.ts';
import { appendOnce } from '../../../src/recorder/once.ts';
import { sealBatch } from '../../../src/recorder/seal.ts';
import type { BlobStore } from '../../../src/blob/store.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import {
  createVaultPool,
  migrate,
  openVault,
  type ArtifactRecord,
  type Vault,
} from '../../../src/vault/index.ts';
import { stackBlobs } from '../../helpers/blobs.ts';
import {
  aibomReady,
  conditionOf,
  createRun,
  getRun,
  leadershipTerms,
  leaseHolder,
  isLeadingLine,
  namespaceWithSigner,
  poll,
  randomBetween,
  sampleRunSpec,
  sha256Digest,
  startControllerProcess,
  stopAllControllers,
  waitForCondition,
  expectOneAibomPerRun,
  expectKubeMirrorsVault,
  type ControllerProcess,
} from '../../helpers/controller-process.ts';
import type { DevPki } from '../../../hack/dev-pki.ts';
import { freshDatabase, kubeConfig, uniqueName } from '../../helpers/stack.ts';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

let namespace: string;

/** The C2PA sidecar objects under a run's prefix in the bucket. */
async function sidecarsOf(ns: string, runId: string): Promise<string[]> {
  const keys = await stackBlobs().list(aibomKeys(ns, runId).prefix);
  return keys.filter((k) => k.endsWith('.c2pa'));
}
let pki: DevPki;
let spec: RunSpec;
let logDir: string;

beforeAll(async () => {
  ({ namespace, pki } = await namespaceWithSigner('op-race'));
  spec = await sampleRunSpec();
  logDir = await mkdtemp(join(tmpdir(), 'op-race-logs-'));
});

afterEach(async () => {
  await stopAllControllers();
});

afterAll(async () => {
  await stopAllControllers();
  if (process.env.KEEP_LOGS) console.log(`controller logs kept in ${logDir}`);
  else if (logDir) await rm(logDir, { recursive: true, force: true });
});

/** A terminal Run as the API server would hand it to the controller (no API server needed here). */
function terminalRun(ns: string, name: string, fail?: string): Run {
  const steps: StepStatus[] = [];
  let t = Date.parse('2026-03-01T10:00:00Z');
  const iso = (ms: number) => new Date(ms).toISOString();
  let phase: 'Succeeded' | 'Failed' = 'Succeeded';
  for (const s of spec.steps) {
    const startedAt = iso(t);
    t += 1_000;
    if (s.id === fail) {
      steps.push({ id: s.id, phase: 'Failed', startedAt, finishedAt: iso(t), error: 'boom' });
      phase = 'Failed';
      break;
    }
    steps.push({ id: s.id, phase: 'Succeeded', startedAt, finishedAt: iso(t), output: { result: s.id } });
  }
  return {
    apiVersion: 'vault.service.dev/v1',
    kind: 'Run',
    metadata: { name, namespace: ns, uid: randomUUID(), generation: 1, creationTimestamp: iso(t - 10_000) },
    spec,
    status: { phase, steps },
  };
}

/** What the controller appends before the AIBOM: one batch per finished step, then the run's. */
async function attestLikeTheController(vault: Vault, run: Run, signer: KeySigner): Promise<string[]> {
  const statuses = new Map((run.status?.steps ?? []).map((s) => [s.id, s]));
  const keys: string[] = [];
  for (const step of run.spec.steps) {
    const st = statuses.get(step.id);
    if (!isFinished(st)) continue;
    const b = stepBatch(run, step, st);
    await appendOnce(vault.claims, b.key, sealBatch(b.items, signer));
    keys.push(b.key);
  }
  const t = terminalBatch(run, new Date());
  await appendOnce(vault.claims, t.key, sealBatch(t.items, signer));
  keys.push(t.key);
  return keys;
}

describe('recordAibom from two replicas at once', () => {
  let url: string;
  let admin: pg.Pool;
  const vaults: Vault[] = [];
  let signer: KeySigner;

  beforeAll(async () => {
    url = await freshDatabase('oprace');
    await migrate(url);
    // Two "replicas": separate pools, separate vault objects, separate S3 clients, one database.
    for (let i = 0; i < 2; i++)
      vaults.push(await openVault(createVaultPool(url, { applicationName: `replica-${i}` })));
    admin = new pg.Pool({ connectionString: url, max: 2 });
    signer = signerFromPem(pki);
  });

  afterAll(async () => {
    await Promise.all(vaults.map((v) => v.close()));
    await admin?.end();
  });

  it('records exactly one AIBOM per run, both callers get the same record, and it verifies (10 fresh runs)', async () => {
    const blobs = [stackBlobs(), stackBlobs()];
    for (let i = 0; i < 10; i++) {
      const run = terminalRun(namespace, `race-${i}`, i % 3 === 2 ? 'summarise' : undefined);
      const runId = run.metadata.uid;
      const keys = await attestLikeTheController(vaults[0]!, run, signer);

      const results = await Promise.all(
        vaults.map((vault, k) =>
          recordAibom(
            { vault, blobs: blobs[k]!, signer, logger: logger.child({ replica: k }) },
            aibomRunOf(run),
          ),
        ),
      );
      const [a, b] = results.map((r) => r.artifact) as [ArtifactRecord, ArtifactRecord];
      expect(b, `run ${i}: both replicas return the stored record`).toEqual(a);

      const count = async (text: string) =>
        Number((await admin.query<{ n: string }>(text, [runId])).rows[0]!.n);
      expect(await count('SELECT count(*) AS n FROM artifacts WHERE run_id = $1')).toBe(1);
      expect(await count(`SELECT count(*) AS n FROM attestations WHERE run_id = $1 AND kind = 'aibom'`)).toBe(
        1,
      );

      // One claim row per logical key, and every attestation of the run stands for exactly one claim:
      // a racer's rolled-back batch leaves nothing behind.
      const claims = await admin.query<{ key: string; ids: string[] }>(
        `SELECT key, attestation_ids::text[] AS ids FROM attestation_claims WHERE key LIKE '%' || $1 || '%'`,
        [runId],
      );
      expect(claims.rows.map((r) => r.key).sort()).toEqual([...keys, `aibom:${runId}`].sort());
      const rows = await admin.query<{ id: string; kind: string; ref: string | null }>(
        `SELECT id::text AS id, kind, c2pa_manifest_ref AS ref FROM attestations WHERE run_id = $1 ORDER BY seq`,
        [runId],
      );
      const claimed = claims.rows.flatMap((r) => r.ids);
      expect(claimed.length).toBe(new Set(claimed).size);
      expect(new Set(claimed)).toEqual(new Set(rows.rows.map((r) => r.id)));

      // The stored blob is the recorded one, and the sidecar the record points to verifies.
      const meta = a.metadata as unknown as AibomMetadata;
      const blob = await blobs[0]!.get(a.objectKey);
      expect(blob, 'AIBOM blob').not.toBeNull();
      expect(sha256Digest(blob!)).toBe(a.digest);
      expect(meta.size).toBe(blob!.length);
      const store = await blobs[0]!.get(meta.c2pa_manifest.key);
      expect(store, 'C2PA sidecar').not.toBeNull();
      expect(sha256Digest(store!)).toBe(meta.c2pa_manifest.digest);
      const verified = verifyManifest({ store: store!, asset: blob!, trustAnchors: pki['ca.crt'] });
      expect(verified.problems).toEqual([]);
      expect(verified.ok).toBe(true);
      expect(verified.runId).toBe(runId);
      expect(verified.attestationIds).toEqual(meta.attestation_ids);
      const aibomRow = rows.rows.find((r) => r.kind === 'aibom')!;
      expect(meta.aibom_attestation_id).toBe(aibomRow.id);
      // The AIBOM attestation and the metadata record name the same C2PA manifest.
      expect(aibomRow.ref).toBe(`s3://${blobs[0]!.bucket}/${meta.c2pa_manifest.key}`);
      // The AIBOM lists every record of the run made before it; its two views and its blob's
      // artifact record follow it, once (one batch for the winner only).
      const at = rows.rows.indexOf(aibomRow);
      expect(meta.attestation_ids).toEqual(rows.rows.slice(0, at).map((r) => r.id));
      expect(rows.rows.slice(at + 1).map((r) => r.kind)).toEqual(['artifact', 'artifact', 'artifact']);
      // The metadata object beside the blob is the record that won.
      const metaObject = await blobs[0]!.get(aibomKeys(namespace, runId).meta);
      expect(metaObject, 'aibom.meta.json').not.toBeNull();
      expect(JSON.parse(metaObject!.toString('utf8'))).toEqual(a.metadata);
      // The loser signed the same bytes too: its sidecar, which no record names, is gone.
      expect(await sidecarsOf(namespace, runId), `run ${i}: one sidecar in the bucket`).toEqual([
        meta.c2pa_manifest.key,
      ]);
    }
  });
});

describe('recordAibom after a crash between its stages', () => {
  let url: string;
  let vault: Vault;
  let db: pg.Pool;
  let signer: KeySigner;

  beforeAll(async () => {
    url = await freshDatabase('opcrash');
    await migrate(url);
    vault = await openVault(createVaultPool(url));
    db = new pg.Pool({ connectionString: url, max: 1 });
    signer = signerFromPem(pki);
  });

  afterAll(async () => {
    await vault?.close();
    await db?.end();
  });

  /** A vault whose artifact read throws once, on its `nth` call (1-based): a process dying right there. */
  function crashingVault(nth: number): Vault {
    let calls = 0;
    return {
      ...vault,
      artifacts: {
        ...vault.artifacts,
        get: (runId, kind) =>
          ++calls === nth
            ? Promise.reject(new Error('simulated crash before reading the artifact record'))
            : vault.artifacts.get(runId, kind),
      },
    };
  }

  /** A store whose put of a key ending in `suffix` throws once. */
  function crashingBlobs(suffix: string): BlobStore {
    const real = stackBlobs();
    let armed = true;
    return {
      ...real,
      bucket: real.bucket,
      put: (key, body, type, meta) => {
        if (armed && key.endsWith(suffix)) {
          armed = false;
          return Promise.reject(new Error(`simulated crash before writing ${key}`));
        }
        return real.put(key, body, type, meta);
      },
    };
  }

  async function afterCrash(crashed: AibomDeps, run: Run): Promise<ArtifactRecord> {
    await expect(recordAibom(crashed, aibomRunOf(run))).rejects.toThrow(/simulated crash/);
    return (await recordAibom({ vault, blobs: stackBlobs(), signer, logger }, aibomRunOf(run))).artifact;
  }

  async function expectConsistent(run: Run, record: ArtifactRecord): Promise<void> {
    const blobs = stackBlobs();
    const meta = record.metadata as unknown as AibomMetadata;
    const rows = await db.query<{ id: string; ref: string | null }>(
      `SELECT id::text AS id, c2pa_manifest_ref AS ref FROM attestations WHERE run_id = $1 AND kind = 'aibom'`,
      [run.metadata.uid],
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]!.id).toBe(meta.aibom_attestation_id);
    const blob = await blobs.get(record.objectKey);
    expect(sha256Digest(blob!)).toBe(record.digest);
    const store = await blobs.get(meta.c2pa_manifest.key);
    expect(verifyManifest({ store: store!, asset: blob!, trustAnchors: pki['ca.crt'] }).ok).toBe(true);
    // The attestation's manifest reference and the metadata record name the same sidecar.
    expect(rows.rows[0]!.ref).toBe(`s3://${blobs.bucket}/${meta.c2pa_manifest.key}`);
    const metaObject = await blobs.get(aibomKeys(run.metadata.namespace, run.metadata.uid).meta);
    expect(metaObject, 'aibom.meta.json beside the blob').not.toBeNull();
    expect(JSON.parse(metaObject!.toString('utf8'))).toEqual(record.metadata);
    // No sidecar of these bytes but the one the record names.
    const sidecars = await sidecarsOf(run.metadata.namespace, run.metadata.uid);
    expect(sidecars.filter((k) => !k.includes('.decoy'))).toEqual([meta.c2pa_manifest.key]);
  }

  /** A vault whose claimed append (the AIBOM's commit) throws once: a process dying before it commits. */
  function vaultDyingBeforeCommit(): Vault {
    let armed = true;
    return {
      ...vault,
      claims: {
        ...vault.claims,
        get: (key) => vault.claims.get(key),
        append: (key, records, options) => {
          if (!armed) return vault.claims.append(key, records, options);
          armed = false;
          return Promise.reject(new Error('simulated crash before the AIBOM record commits'));
        },
      },
    };
  }

  it('a crash after both objects are put, before the record commits: the retry removes the sidecar no record names, and only that one', async () => {
    const run = terminalRun(namespace, 'crash-before-commit');
    await attestLikeTheController(vault, run, signer);
    await expect(
      recordAibom({ vault: vaultDyingBeforeCommit(), blobs: stackBlobs(), signer, logger }, aibomRunOf(run)),
    ).rejects.toThrow(/simulated crash/);
    const orphaned = await sidecarsOf(namespace, run.metadata.uid);
    expect(orphaned).toHaveLength(1);
    // A sidecar made for other bytes (a superseded AIBOM's) and a repair's are not this sweep's.
    const prefix = aibomKeys(namespace, run.metadata.uid).prefix;
    const blobs = stackBlobs();
    await blobs.put(`${prefix}aibom.decoy0other.c2pa`, Buffer.from('x'), 'application/c2pa', {
      digest: 'sha256:' + '0'.repeat(64),
    });
    const own = (await blobs.stat(orphaned[0]!))!.metadata;
    await blobs.put(`${prefix}aibom.decoy1repair.c2pa`, Buffer.from('y'), 'application/c2pa', {
      ...own,
      'repair-id': randomUUID(),
    });
    const record = (await recordAibom({ vault, blobs, signer, logger }, aibomRunOf(run))).artifact;
    const named = (record.metadata as unknown as AibomMetadata).c2pa_manifest.key;
    expect(named).not.toBe(orphaned[0]);
    expect((await sidecarsOf(namespace, run.metadata.uid)).sort()).toEqual(
      [named, `${prefix}aibom.decoy0other.c2pa`, `${prefix}aibom.decoy1repair.c2pa`].sort(),
    );
    await expectConsistent(run, record);
  });

  it('a crash before the C2PA sidecar is written is repaired by the next attempt', async () => {
    const run = terminalRun(namespace, 'crash-sidecar');
    await attestLikeTheController(vault, run, signer);
    const record = await afterCrash({ vault, blobs: crashingBlobs('.c2pa'), signer, logger }, run);
    await expectConsistent(run, record);
  });

  // The AIBOM attestation, its claim and the metadata row commit in one transaction, so there is
  // no moment between them to crash in; the closest is right after that commit, before the record
  // is read back: the retry must find and return the same record.
  it('a crash right after the AIBOM transaction commits is repaired by the next attempt', async () => {
    const run = terminalRun(namespace, 'crash-artifact-row');
    await attestLikeTheController(vault, run, signer);
    const record = await afterCrash({ vault: crashingVault(2), blobs: stackBlobs(), signer, logger }, run);
    await expectConsistent(run, record);
  });

  it('a crash after the metadata row, before aibom.meta.json is written, is repaired by the next attempt', async () => {
    const run = terminalRun(namespace, 'crash-meta-object');
    await attestLikeTheController(vault, run, signer);
    const record = await afterCrash({ vault, blobs: crashingBlobs('aibom.meta.json'), signer, logger }, run);
    await expectConsistent(run, record);
  });
});

describe('two controller processes on one Lease', () => {
  it('only one leads at a time; killing the leader lets the standby record every AIBOM exactly once', async () => {
    // Its own namespace: the Runs of this test only.
    const { namespace, signerSecret } = await namespaceWithSigner('op-race-ctl');
    const url = await freshDatabase('opracectl');
    const lease = uniqueName('op-race-lease');
    const common = { databaseUrl: url, watchNamespace: namespace, lease, signerSecret, logDir };
    // Both start at once and migrate the same fresh database concurrently (advisory lock).
    const procs = await Promise.all([
      startControllerProcess({ ...common, name: `${lease}-a` }),
      startControllerProcess({ ...common, name: `${lease}-b` }),
    ]);
    await Promise.all(procs.map((p) => p.metricsPort())); // both up: leader and warm standby
    const leader = await poll(async () => {
      for (const p of procs) if ((await p.logs()).some(isLeadingLine)) return p;
      return undefined;
    }, 'one of the two controllers to lead');
    const standby = procs.find((p) => p !== leader)!;
    expect(await leaseHolder(lease)).toBe(await leader.identity());

    const names = Array.from({ length: 10 }, (_, i) => `ctl-${i}`);
    const fails = new Map(names.map((n, i) => [n, i % 3 === 2 ? 'summarise' : undefined]));
    await Promise.all(names.map((n) => createRun(namespace, n, spec)));
    const pipeline = kubeConfig('admin');
    const drive = (name: string) => {
      const fail = fails.get(name);
      return driveRun(pipeline, namespace, name, {
        stepDelayMs: randomBetween(50, 300),
        ...(fail !== undefined ? { fail } : {}),
      });
    };

    // Wave 1 under the first leader; kill it once some (not necessarily all) AIBOMs are recorded.
    const wave1 = names.slice(0, 5).map(drive);
    await poll(async () => {
      const runs = await Promise.all(names.slice(0, 5).map((n) => getRun(namespace, n)));
      return runs.filter((r) => aibomReady(conditionOf(r, 'AIBOMReady'))).length >= 2;
    }, 'two AIBOMs recorded by the first leader');
    // It is still the leader (the Lease says so) when it dies.
    expect(await leaseHolder(lease)).toBe(await leader.identity());
    const killedAt = new Date();
    await leader.kill();

    // Wave 2 while nobody leads; the standby takes over after the lease expires.
    const wave2 = names.slice(5).map(drive);
    await Promise.all([...wave1, ...wave2]);
    const takeover = await standby.waitLeading({ timeoutMs: 90_000 });
    expect(Date.parse(takeover.time)).toBeGreaterThanOrEqual(killedAt.getTime());
    const runs = await Promise.all(
      names.map((n) =>
        waitForCondition(namespace, n, 'AIBOMReady', aibomReady, 'AIBOMReady=True after the takeover'),
      ),
    );
    expect(await leaseHolder(lease)).toBe(await standby.identity());

    // The leadership terms in the two logs never overlap.
    const terms = await leadershipTerms(procs, (p) => (p === leader ? killedAt : new Date()));
    expect(terms[0]?.name).toBe(leader.name);
    expect(terms.at(-1)?.name).toBe(standby.name);
    for (let i = 1; i < terms.length; i++) expect(terms[i]!.start).toBeGreaterThanOrEqual(terms[i - 1]!.end);

    await expectOneAibomPerRun(url, runs);
    await expectKubeMirrorsVault(url, runs);
    // The standby finished the work: it recorded every AIBOM of wave 2, and no Run's AIBOM was
    // created by both processes.
    const recorded = async (p: ControllerProcess) =>
      (await p.logs())
        .filter((l) => l.msg === 'AIBOM recorded' && l.created === true)
        .map((l) => l.run as string);
    const [byLeader, byStandby] = [await recorded(leader), await recorded(standby)];
    for (const n of names.slice(5)) expect(byStandby).toContain(`${namespace}/${n}`);
    // (A SIGKILL may cut the leader's log line after its insert, so "at most once" per log line.)
    const all = [...byLeader, ...byStandby];
    expect(all.length).toBe(new Set(all).size);

    // Graceful shutdown of the survivor releases the Lease.
    const exit = await standby.terminate();
    expect(exit.code).toBe(0);
    expect(await leaseHolder(lease)).toBe('');
  }, 300_000);
});

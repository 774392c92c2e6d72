/**
 * Issue 24, asynchronous standby: the same burst and SIGKILL as sync.test.ts, but the standby
 * streams asynchronously and its replication link is held (hack/stack/proxy.ts) while the last
 * AIBOMs are recorded and a checkpoint is signed, so the promoted standby really lacks transactions
 * the service had acknowledged. The service must notice what the vault lost while the Run statuses
 * and the bucket still show it, write it down (vault_losses), refuse to serve it, record every Run
 * again from Kubernetes (one record set, one AIBOM, the lost AIBOM superseded, never overwritten),
 * delete the Attestation resources naming lost ids, say what it could not repair (RecordsLost
 * condition, Warning Events, metrics), and sign no checkpoint over the new history until the loss
 * is accepted (VAULT_ACCEPT_LOST_CHECKPOINT). docs/failover.md describes what the test checks.
 */
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { S3Client } from '../../../src/blob/store.ts';
import type { AibomMetadata } from '../../../src/recorder/index.ts';
import type { Run } from '../../../src/crd/run.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import {
  eventsOf,
  expectKubeMirrorsVault,
  expectOneAibomPerRun,
  getRun,
  manifestRefMismatches,
  metricValue,
  poll,
  randomBetween,
  stackS3,
  startControllerProcess,
  stopAllControllers,
  vaultFacts,
} from '../../helpers/controller-process.ts';
import { failoverBurst, lossRows, printRow, vaultIds } from '../../helpers/failover.ts';
import { stack } from '../../helpers/stack.ts';

const RUNS = Number(process.env.FAILOVER_RUNS ?? 220);
let logDir: string;
const disposers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  logDir = await mkdtemp(join(tmpdir(), 'failover-async-'));
});

afterAll(async () => {
  await stopAllControllers();
  for (const d of disposers.splice(0)) await d();
  if (process.env.KEEP_LOGS) console.log(`[failover] logs kept in ${logDir}`);
  else await rm(logDir, { recursive: true, force: true });
});

const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('asynchronous standby missing the last transactions: SIGKILL of the primary during a burst', () => {
  it('notices what the vault lost, writes it down, records every Run again once, and signs no contradicting checkpoint', async () => {
    const token = stack().kube.tokens.admin;
    let checkpointBeforeKill = 0;
    const o = await failoverBurst({
      mode: 'async',
      prefix: 'fo-async',
      count: RUNS,
      killAfter: randomBetween(Math.floor(RUNS / 4), Math.floor(RUNS / 3)),
      holdFor: 15,
      logDir,
      disposers,
      // While the link is held: a checkpoint signed over records the standby never gets.
      beforeKill: async (apiUrl) => {
        const res = await fetch(`${apiUrl}/v1/chain/checkpoint?wait=30`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}` },
        });
        expect(res.status).toBe(200);
        checkpointBeforeKill = ((await res.json()) as { tree_size: number }).tree_size;
      },
    });
    const db = o.pair.url;
    const held = await vaultIds(db);

    // The standby really missed acknowledged records (else this test would prove nothing).
    const lost = [...o.ackedBeforeKill].filter((id) => !held.has(id));
    expect(lost.length).toBeGreaterThan(0);

    // Noticed and written down: every lost id a Run status or an Attestation resource showed is
    // named by a loss. An id only an API answer showed (a client read a record the status did not
    // name yet) is named nowhere the service can look: counted, and said in docs/failover.md.
    const losses = await lossRows(db);
    const named = new Set(losses.flatMap((l) => l.missing_ids));
    const where = (id: string): string =>
      `${id}: ${[o.ack.fromStatus.has(id) ? 'status' : '', o.ack.fromResources.has(id) ? 'resource' : '', o.ack.fromApi.has(id) ? 'api' : ''].filter(Boolean).join('+')}`;
    const shown = lost.filter((id) => o.ack.fromStatus.has(id) || o.ack.fromResources.has(id));
    expect(shown.filter((id) => !named.has(id)).map(where)).toEqual([]);
    const apiOnly = lost.filter((id) => !named.has(id));
    const runLosses = losses.filter((l) => l.scope === 'run');
    const affected = new Set(runLosses.map((l) => l.run_id));
    expect(affected.size).toBeGreaterThan(0);

    // Recorded again from the Runs: one record set and one AIBOM each, Kubernetes mirrors the vault
    // (the Attestation resources of lost ids are gone), the new history's chain is intact.
    await expectOneAibomPerRun(db, o.runs);
    await expectKubeMirrorsVault(db, o.runs);
    expect(await manifestRefMismatches(db)).toEqual([]);
    const facts = await vaultFacts(db);
    expect(facts.chain.ok, JSON.stringify(facts.chain)).toBe(true);
    const duplicated = [...facts.aibomAttestations.values(), ...facts.stepAttestations.values()].filter(
      (n) => n > 1,
    ).length;
    expect(duplicated).toBe(0);

    // Said on each affected Run, for good, with a Warning Event. Read live, not from the settled
    // snapshot: a Run whose lost record its status did not name yet (shown only by an Attestation
    // resource) passed the snapshot's check before the sweep wrote its loss, and its status with
    // RecordsLost (one write with the new record ids) may come after the snapshot (seen once in a
    // full suite run). The statuses read below are the live ones for the same reason.
    const byId = new Map(o.runs.map((r) => [r.metadata.uid, r]));
    const live = async (uid: string): Promise<Run> => getRun(o.namespace, byId.get(uid)!.metadata.name);
    for (const id of affected) {
      const said = await poll(
        async () => {
          const c = (await live(id!)).status?.conditions?.find((c) => c.type === 'RecordsLost');
          return c?.reason === 'RecordedAgain' ? c : undefined;
        },
        `RecordsLost=RecordedAgain on the Run ${id}`,
        // Generous: in a full suite run this file took 676 s against 75 s alone. Two full suite
        // runs timed out here (60 s, then 180 s) on a Run whose loss only the bucket showed, which
        // was then never said on the Run: fixed, and pinned by test/unit/controller/losses.test.ts.
        { timeoutMs: 180_000, intervalMs: 500 },
      );
      expect(said).toMatchObject({ status: 'True', reason: 'RecordedAgain' });
      const events = await eventsOf(o.namespace, id!);
      expect(events.some((e) => e.type === 'Warning' && e.reason === 'RecordsLost')).toBe(true);
    }

    // A lost AIBOM found in the bucket is superseded, never overwritten: its bytes are where they
    // were and still hash to its digest; the new one names it; the lost ids are not served.
    const s3 = new S3Client(stackS3());
    const superseded = losses.filter((l) => l.details.source === 'bucket');
    for (const l of superseded) {
      const old = (l.details.claimed as { aibom: AibomMetadata }).aibom;
      const meta = (await live(l.run_id!)).status!.artifacts!.aibom as AibomMetadata;
      expect(meta.supersedes?.digest).toBe(old.digest);
      const bytes = await s3.getObject(stackS3().bucket, old.key);
      expect(bytes !== null && sha256(bytes)).toBe(old.digest);
    }
    s3.close();
    for (const id of lost.slice(0, 10)) {
      const res = await fetch(`${o.apiUrl}/v1/attestations/${id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status, id).toBe(404);
    }
    const sample = await live([...affected][0]!);
    const download = await fetch(`${o.apiUrl}/v1/runs/${sample.metadata.uid}/artifacts/aibom`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(download.status).toBe(200);
    const sampleMeta = sample.status!.artifacts!.aibom as AibomMetadata;
    expect(sha256(Buffer.from(await download.arrayBuffer()))).toBe(sampleMeta.digest);

    const metrics = await o.controller.metrics();
    expect(
      metricValue(metrics, 'aibom_vault_losses_recorded_total', { source: 'run-status' }),
    ).toBeGreaterThan(0);

    // The checkpoint signed while the link was held covers records the vault lost: written down,
    // and nothing is signed over the new history ...
    const cpLoss = await poll(
      async () => (await lossRows(db)).find((l) => l.scope === 'checkpoint'),
      'the lost checkpoint written down',
    );
    const witnessed = cpLoss.details.witnessed as { tree_size: number; root_hash: string };
    expect(witnessed.tree_size).toBeGreaterThanOrEqual(checkpointBeforeKill);
    await poll(
      async () => metricValue(await o.controller.metrics(), 'aibom_vault_checkpoint_history_lost') === 1,
      'the checkpointer refusing to sign',
    );
    const refused = await fetch(`${o.apiUrl}/v1/chain/checkpoint?wait=3`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(refused.status).toBe(202);
    // ... until an operator accepts the loss: then the new history is signed and verifies.
    await o.controller.terminate();
    const accepted = await startControllerProcess({
      ...o.opts,
      name: `${o.namespace}-accepted`,
      env: { ...o.env, VAULT_ACCEPT_LOST_CHECKPOINT: `${witnessed.tree_size}:${witnessed.root_hash}` },
    });
    await accepted.waitLeading();
    const signed = await fetch(`${o.apiUrl}/v1/chain/checkpoint?wait=30`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(signed.status).toBe(200);
    const key = join(logDir, 'signer.pem');
    await writeFile(key, signerFromPem(o.pki).publicKey.export({ type: 'spki', format: 'pem' }));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(repoRoot, 'src/bin/service-ctl.ts'), 'verify', '--chain', '--key', key],
      { env: { ...process.env, SERVICE_API_URL: o.apiUrl, SERVICE_TOKEN: token } },
    );
    expect(stdout).toContain('chain verified');
    expect(metricValue(await accepted.metrics(), 'aibom_vault_checkpoint_history_lost')).toBe(0);

    expect(Number.isFinite(o.rtoMs)).toBe(true);
    const resources = lost.filter((id) => o.ack.fromResources.has(id)).length;
    // Runs whose loss only the bucket showed (the status naming the lost AIBOM never written): they
    // passed the condition's check above like the others.
    const fromStatus = new Set(
      runLosses.filter((l) => l.details.source === 'run-status').map((l) => l.run_id),
    );
    const bucketOnly = [...affected].filter((id) => !fromStatus.has(id)).length;
    printRow({
      fault: 'PostgreSQL primary SIGKILL, asynchronous standby (link held) promoted',
      inFlight: o.inFlight,
      acknowledged: o.ack.ids.size,
      lost: lost.length,
      duplicated,
      dangling:
        `${lost.length - apiOnly.length} of ${lost.length} lost ids found (${runLosses.filter((l) => l.details.source === 'run-status').length} Run statuses, ${superseded.length} AIBOMs in the bucket, ` +
        `1 checkpoint; ${bucketOnly} Run(s) shown only by the bucket); ${affected.size} Runs recorded again, ${superseded.length} AIBOMs superseded, ` +
        `${resources} Attestation resources deleted; ${apiOnly.length} seen only in API answers not named; the lost ids stay unresolvable (RecordsLost)`,
      rto: `${(o.rtoMs / 1000).toFixed(1)} s (failover ${o.report.movedMs} ms)`,
    });
  }, 900_000);
});

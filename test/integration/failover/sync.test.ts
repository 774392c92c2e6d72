/**
 * Issue 24, synchronous standby: PostgreSQL with synchronous_standby_names = 'ANY 1 (…)' and
 * synchronous_commit = on (hack/stack/standby.ts), the controller and the API as real processes
 * reaching it through the proxy, a burst of Runs, the primary killed with SIGKILL mid-burst, the
 * standby promoted and the address moved. RPO 0: every record a Run status, an Attestation resource
 * or an API answer acknowledged is on the new primary; no Run has a second record set or AIBOM; the
 * hash chain and the latest signed checkpoint verify (service-ctl, a separate process); nothing was
 * written down as lost. RTO (kill → first AIBOM on the new primary) is printed, not asserted.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import {
  expectKubeMirrorsVault,
  expectOneAibomPerRun,
  manifestRefMismatches,
  metricValue,
  randomBetween,
  stopAllControllers,
  vaultFacts,
} from '../../helpers/controller-process.ts';
import { failoverBurst, lossRows, printRow, vaultIds } from '../../helpers/failover.ts';
import { stack } from '../../helpers/stack.ts';

const RUNS = Number(process.env.FAILOVER_RUNS ?? 220);
let logDir: string;
const disposers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  logDir = await mkdtemp(join(tmpdir(), 'failover-sync-'));
});

afterAll(async () => {
  await stopAllControllers();
  for (const d of disposers.splice(0)) await d();
  if (process.env.KEEP_LOGS) console.log(`[failover] logs kept in ${logDir}`);
  else await rm(logDir, { recursive: true, force: true });
});

describe('synchronous standby: SIGKILL of the primary during a burst of Runs', () => {
  it('loses no acknowledged record, records each Run once, and the chain and checkpoint verify', async () => {
    const o = await failoverBurst({
      mode: 'sync',
      prefix: 'fo-sync',
      count: RUNS,
      killAfter: randomBetween(Math.floor(RUNS / 4), Math.floor(RUNS / 2)),
      logDir,
      disposers,
    });
    const db = o.pair.url;

    // RPO 0: everything acknowledged, before and after the kill, is on the new primary.
    const held = await vaultIds(db);
    const lost = [...o.ack.ids].filter((id) => !held.has(id));
    expect(lost).toEqual([]);
    expect(o.ackedBeforeKill.size).toBeGreaterThan(0);
    expect(o.ack.fromApi.size).toBeGreaterThan(0);
    expect(o.ack.fromResources.size).toBeGreaterThan(0);

    // One record set and one AIBOM per Run; Kubernetes mirrors the vault; nothing written down as lost.
    await expectOneAibomPerRun(db, o.runs);
    await expectKubeMirrorsVault(db, o.runs);
    expect(await manifestRefMismatches(db)).toEqual([]);
    expect(await lossRows(db)).toEqual([]);
    const facts = await vaultFacts(db);
    const duplicated = [...facts.aibomAttestations.values(), ...facts.stepAttestations.values()].filter(
      (n) => n > 1,
    ).length;
    expect(duplicated).toBe(0);
    const metrics = await o.controller.metrics();
    expect(metricValue(metrics, 'aibom_vault_losses_recorded_total')).toBe(0);

    // The hash chain (vaultFacts.chain) and the newest signed checkpoint, checked by service-ctl.
    expect(facts.chain.ok, JSON.stringify(facts.chain)).toBe(true);
    const key = join(logDir, 'signer.pem');
    await writeFile(key, signerFromPem(o.pki).publicKey.export({ type: 'spki', format: 'pem' }));
    const checkpoint = await fetch(`${o.apiUrl}/v1/chain/checkpoint?wait=30`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack().kube.tokens.admin}` },
    });
    expect(checkpoint.status).toBe(200);
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(repoRoot, 'src/bin/service-ctl.ts'), 'verify', '--chain', '--key', key],
      { env: { ...process.env, SERVICE_API_URL: o.apiUrl, SERVICE_TOKEN: stack().kube.tokens.admin } },
    );
    expect(stdout).toContain('chain verified');

    expect(Number.isFinite(o.rtoMs)).toBe(true);
    printRow({
      fault: 'PostgreSQL primary SIGKILL, synchronous standby promoted',
      inFlight: o.inFlight,
      acknowledged: o.ack.ids.size,
      lost: lost.length,
      duplicated,
      dangling: 'none found',
      rto: `${(o.rtoMs / 1000).toFixed(1)} s (failover ${o.report.movedMs} ms)`,
    });
  }, 900_000);
});

/**
 * A split view caught (docs/transparency.md "Witnessed logs"): whoever holds the service's keys runs
 * a second copy of the deployment (another database, the same note key and origin) and shows it to
 * some auditors. Both copies push their checkpoints to the same real witness (litewitness). The
 * witness cosigns the first copy's tree of six records; the second copy's own tree of six different
 * records is sent from size 0, answered 409 (the witness holds 6), sent again from 6 and refused
 * with 422. The second copy raises its alarm: the refusal is stored, its Consistent condition turns
 * False, its metric drops to 0 and a Warning Event is recorded on its Lease. An export bundle of the
 * second copy carries proofs to the refused checkpoint: `service-ctl verify` with a policy naming the
 * witness refuses it, and accepts the first copy's.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EventsV1Api } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki, type DevPki } from '../../../hack/dev-pki.ts';
import { makeCheckpoint } from '../../../src/checkpoint/tree.ts';
import { eventRecorder, kubeClient } from '../../../src/kube/index.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { parseWitnessVkey } from '../../../src/tlog/cosignature.ts';
import { ed25519NoteSigner, parseNote } from '../../../src/tlog/note.ts';
import { createVaultPool, openVault, type Vault } from '../../../src/vault/index.ts';
import { createWitnessClient } from '../../../src/witness/client.ts';
import { alarmEvents } from '../../../src/witness/loop.ts';
import { originOf, scittLog, vaultLog } from '../../../src/witness/logs.ts';
import type { PushOutcome } from '../../../src/witness/push.ts';
import { runWitnesser, type WitnessAlarm } from '../../../src/witness/witnesser.ts';
import { stackApp } from '../../helpers/app.ts';
import { cliMain } from '../../helpers/cli-main.ts';
import { createNamespace } from '../../helpers/rbac.ts';
import { runRecords } from '../../helpers/records.ts';
import { freshDatabase, kubeConfig, kubeAccess, stack, uniqueName } from '../../helpers/stack.ts';
import { waitFor } from '../../helpers/wait.ts';
import { testWitness } from './witness-helpers.ts';

const ns = uniqueName('split');
const prefix = `${ns}.split.test`;
const VAULT = originOf(prefix, 'vault');
const SCITT = originOf(prefix, 'scitt');
let noteKey: KeyObject;
let pki: DevPki;
/** The CA of the service signer both copies use. */
let caPem: string;
let witness: Awaited<ReturnType<typeof testWitness>>;
const noteSigner = (origin: string) => ed25519NoteSigner(origin, noteKey);

/** One copy of the deployment: its own database, the shared keys, its own witnessing loop. */
interface Copy {
  vault: Vault;
  app: FastifyInstance;
  registry: Registry;
  outcomes: PushOutcome[];
  alarms: WitnessAlarm[];
  stop: AbortController;
  loop: Promise<void>;
}
let honest: Copy;
let fork: Copy;
const lease = { namespace: ns, name: 'aibom-vault-controller' };
const events = eventRecorder({
  client: kubeClient(kubeAccess('admin')),
  reportingController: 'vault.service.dev/controller',
  reportingInstance: 'split-view-test',
  logger: pino({ level: 'silent' }),
});

async function copy(name: string): Promise<Copy> {
  const vault = await openVault(createVaultPool(await freshDatabase(name)));
  // The same key as a signer object of this copy's own (the key store remembers per signer object
  // which vault it recorded the signer in; one process is one deployment, here are two).
  const signer: KeySigner = signerFromPem(pki);
  for (let i = 0; i < 2; i++) await vault.attestations.append(runRecords(signer, ns).records);
  await makeCheckpoint(vault.checkpoints, { signer, caCertificates: signer.caCertificates });
  const c: Copy = {
    vault,
    app: await stackApp(vault, signer.caCertificates, { signer }),
    registry: new Registry(),
    outcomes: [],
    alarms: [],
    stop: new AbortController(),
    loop: Promise.resolve(),
  };
  const toEvent = alarmEvents(events, lease);
  c.loop = runWitnesser(
    {
      vault,
      logs: [vaultLog(vault, VAULT), scittLog(vault, SCITT)],
      signer: noteSigner,
      witnesses: [
        {
          key: parseWitnessVkey(witness.vkey),
          client: createWitnessClient({ url: witness.url, timeoutMs: 10_000 }),
        },
      ],
      intervalMs: 3_600_000,
      logger: pino({ level: 'silent' }),
      registry: c.registry,
      onOutcome: (_log, _w, o) => c.outcomes.push(o),
      onAlarm: (a) => {
        c.alarms.push(a);
        toEvent(a);
      },
    },
    c.stop.signal,
  );
  return c;
}

const admin = () => ({ authorization: `Bearer ${stack().kube.tokens.admin}` });

/** The copy's export bundle of the namespace, written next to the stack; and the CA the CLI trusts. */
async function exported(c: Copy, name: string): Promise<{ bundle: string; ca: string }> {
  const res = await c.app.inject({
    method: 'POST',
    url: '/v1/attestations/export',
    headers: admin(),
    payload: { namespaces: [ns] },
  });
  expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
  const bundle = join(stack().root, `${ns}-${name}.tar`);
  const ca = join(stack().root, `${ns}-ca.pem`);
  await writeFile(bundle, res.rawPayload);
  await writeFile(ca, caPem);
  return { bundle, ca };
}

beforeAll(async () => {
  noteKey = generateKeyPairSync('ed25519').privateKey;
  pki = await generateDevPki();
  caPem = pki['ca.crt'];
  await createNamespace(ns);
  witness = await testWitness([VAULT, SCITT], (o) => noteSigner(o).vkey);
  honest = await copy('split_a');
  await waitFor('the honest copy cosigned', () =>
    Promise.resolve(honest.outcomes.length > 0 ? true : undefined),
  );
  fork = await copy('split_b');
});

afterAll(async () => {
  for (const c of [honest, fork]) {
    c?.stop.abort();
    await c?.loop;
    await c?.app.close();
    await c?.vault.close();
  }
  await events.close();
  await witness?.stop();
});

describe('two trees of the same size shown to one witness', () => {
  it('the witness cosigns the first and refuses the second (409, then 422); the second copy alarms', async () => {
    expect(honest.outcomes[0]).toMatchObject({ kind: 'cosigned', oldSize: 0 });
    const refused = await waitFor('the fork refused', () => Promise.resolve(fork.outcomes[0]));
    const [a, b] = await Promise.all([
      honest.vault.tlog.checkpoint('vault'),
      fork.vault.tlog.checkpoint('vault'),
    ]);
    expect(a!.treeSize).toBe(6);
    expect(b!.treeSize).toBe(6);
    expect(a!.rootHash.equals(b!.rootHash)).toBe(false);
    console.log(
      `honest copy: ${a!.origin} size ${a!.treeSize} root ${a!.rootHash.toString('base64')} -> cosigned\n` +
        `fork:        ${b!.origin} size ${b!.treeSize} root ${b!.rootHash.toString('base64')} -> sent from old 0, ` +
        `409 (witness holds ${refused.conflicts.join(',')}), sent again from old ${refused.oldSize}: ` +
        `${refused.kind}${'status' in refused ? ` (HTTP ${refused.status}: ${refused.detail})` : ''}`,
    );
    expect(refused).toMatchObject({ kind: 'inconsistent', status: 422, oldSize: 6, conflicts: [6] });
    expect(fork.alarms).toEqual([
      expect.objectContaining({ log: 'vault', outcome: 'inconsistent', treeSize: 6 }),
    ]);
    console.log(`alarm: ${fork.alarms[0]!.message}`);
    // The honest copy saw none; the fork's checkpoint carries no cosignature.
    expect(honest.alarms).toEqual([]);
    expect(b!.cosignatures).toEqual([]);
    const served = await fork.app.inject({ url: '/v1/tlog/vault/checkpoint', headers: admin() });
    expect(parseNote(served.body).signatures.map((s) => s.name)).toEqual([VAULT]);
  });

  it('the alarm: a False condition in the API, the metric at 0, a Warning Event on the Lease', async () => {
    const status = await fork.app.inject({ url: '/v1/tlog/vault/witnesses', headers: admin() });
    const body = status.json<{
      witnesses: { name: string; conditions: { status: string; reason: string; message: string }[] }[];
    }>();
    console.log(`GET /v1/tlog/vault/witnesses (fork): ${JSON.stringify(body.witnesses)}`);
    expect(body.witnesses).toEqual([
      expect.objectContaining({
        name: witness.name,
        cosigned_size: null,
        conditions: [
          expect.objectContaining({
            type: 'Consistent',
            status: 'False',
            reason: 'WitnessRefusedInconsistent',
          }),
        ],
      }),
    ]);
    const honestStatus = await honest.app.inject({ url: '/v1/tlog/vault/witnesses', headers: admin() });
    expect(honestStatus.json()).toMatchObject({
      witnesses: [{ conditions: [{ status: 'True', reason: 'Cosigned' }] }],
    });
    expect(await fork.registry.getSingleMetricAsString('aibom_vault_tlog_witness_consistent')).toContain(
      `aibom_vault_tlog_witness_consistent{log="vault",witness="${witness.name}"} 0`,
    );
    expect(await fork.registry.getSingleMetricAsString('aibom_vault_tlog_witness_refusals_total')).toContain(
      `aibom_vault_tlog_witness_refusals_total{log="vault",witness="${witness.name}",outcome="inconsistent"} 1`,
    );
    const event = await waitFor('the Warning Event', async () => {
      const list = await kubeConfig('admin')
        .makeApiClient(EventsV1Api)
        .listNamespacedEvent({ namespace: ns });
      return list.items.find((e) => e.reason === 'WitnessRefusedCheckpoint');
    });
    console.log(
      `Event ${event.type} ${event.reason} on ${event.regarding?.kind}/${event.regarding?.name}: ${event.note}`,
    );
    expect(event).toMatchObject({
      type: 'Warning',
      regarding: { kind: 'Lease', name: lease.name, namespace: ns },
    });
    expect(event.note).toContain('split view');
  });

  it('service-ctl verify with the witness in its policy accepts the honest bundle and refuses the one built on the refused checkpoint', async () => {
    const policy = join(stack().root, `${ns}-policy.txt`);
    // c2sp.org/tlog-policy: the vault log's key and the one witness, whose cosignature is required.
    await writeFile(
      policy,
      [`log ${noteSigner(VAULT).vkey}`, `witness w1 ${witness.vkey}`, 'quorum w1', ''].join('\n'),
    );
    const good = await exported(honest, 'honest');
    const ok = await cliMain('verify', good.bundle, '--trust-anchor', good.ca, '--witness-policy', policy);
    console.log(`service-ctl verify (honest copy's bundle) --witness-policy:\n${ok.stdout}${ok.stderr}`);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`6 records with inclusion proofs to ${VAULT} size 6 (cosigned by w1)`);
    const bad = await exported(fork, 'fork');
    const refused = await cliMain('verify', bad.bundle, '--trust-anchor', bad.ca, '--witness-policy', policy);
    console.log(`service-ctl verify (fork's bundle) --witness-policy:\n${refused.stdout}${refused.stderr}`);
    expect(refused.code).toBe(1);
    const fails = refused.stdout.split('\n').filter((l) => l.startsWith('FAIL'));
    expect(fails).toHaveLength(6);
    for (const l of fails)
      expect(l).toMatch(
        /vault\.tlog-proof {2}WITNESS_QUORUM_NOT_MET: checkpoint .* size 6: cosigned by no policy witness/,
      );
    // The same fork bundle without a witness policy: its own checkpoint is signed and includes the
    // records; nothing else is claimed (the point of a policy).
    const unwitnessed = await cliMain(
      'verify',
      bad.bundle,
      '--trust-anchor',
      bad.ca,
      '--tlog-key',
      noteSigner(VAULT).vkey,
    );
    expect(unwitnessed.code, unwitnessed.stdout).toBe(0);
    expect(unwitnessed.stdout).toContain('no policy witness checked');
  });
});

import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { access, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { formatVkey, SIG_TYPE_COSIGNATURE_V1, SIG_TYPE_ED25519 } from '../../src/tlog/note.ts';
import { freePort, startProcess, waitReady, type Launch, type Proc } from './proc.ts';

const run = promisify(execFile);

/** A running c2sp.org/tlog-witness: litewitness (filippo.io/torchwood) with its own ssh-agent. */
export interface Witness {
  readonly procs: readonly Proc[];
  /** Its name: the key name of its cosignature lines. */
  readonly name: string;
  /** The submission prefix (POST <url>/add-checkpoint): what TLOG_WITNESSES names. */
  readonly url: string;
  /** Its cosignature/v1 verifier key, as litewitness printed it at start. */
  readonly vkey: string;
  /** Its SQLite database (logs are added to it while it runs, as witnessctl does). */
  readonly db: string;
}

export interface WitnessTools {
  readonly litewitness: string;
  /** witnessctl's add-log and add-key (hack/go/torchwood/witness-add-log). */
  readonly 'witness-add-log': string;
}

/** The 32 raw bytes of an OpenSSH `ssh-ed25519 <base64>` public key line. */
function sshEd25519Raw(pubLine: string): Buffer {
  const blob = Buffer.from(pubLine.trim().split(/\s+/)[1] ?? '', 'base64');
  const typeLen = blob.readUInt32BE(0);
  if (blob.subarray(4, 4 + typeLen).toString() !== 'ssh-ed25519') throw new Error('not an ssh-ed25519 key');
  const keyLen = blob.readUInt32BE(4 + typeLen);
  return blob.subarray(8 + typeLen, 8 + typeLen + keyLen);
}

/**
 * Starts litewitness on a random loopback port: an Ed25519 key made with ssh-keygen for this
 * witness only, held by a dedicated ssh-agent (litewitness signs through the agent protocol, as
 * its README runs it), a fresh SQLite database. Logs are added with {@link addLogToWitness}.
 * Nothing outlives `dir`.
 */
export async function startWitness(
  dir: string,
  tools: WitnessTools,
  options: { name?: string; launch?: Launch } = {},
): Promise<Witness> {
  const launch = options.launch ?? {};
  const name = options.name ?? 'witness.aibom-vault.stack/w1';
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const key = join(dir, 'witness.key');
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', key]);
  const { stdout: fp } = await run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${key}.pub`]);
  const fingerprint = fp.split(/\s+/)[1]!;
  const sock = join(dir, 'agent.sock');
  const agent = await startProcess({
    name: 'witness-ssh-agent',
    command: 'ssh-agent',
    args: ['-D', '-a', sock],
    logFile: join(dir, 'ssh-agent.log'),
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(
    agent,
    () =>
      access(sock).then(
        () => true,
        () => false,
      ),
    15_000,
    launch.signal,
  );
  await run('ssh-add', [key], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
  const db = join(dir, 'witness.db');
  const port = await freePort();
  const logFile = join(dir, 'litewitness.log');
  const witness = await startProcess({
    name: 'witness',
    command: tools.litewitness,
    args: ['-name', name, '-db', db, '-ssh-agent', sock, '-key', fingerprint, '-listen', `127.0.0.1:${port}`],
    logFile,
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(witness, async () => (await fetch(`${url}/`)).ok, 30_000, launch.signal);
  // litewitness prints its verifier key at start; it must be the key ssh-keygen made, typed 0x04.
  const printed = /vkey=(\S+)/.exec(await readFile(logFile, 'utf8'))?.[1];
  const expected = formatVkey(
    name,
    SIG_TYPE_COSIGNATURE_V1,
    sshEd25519Raw(await readFile(`${key}.pub`, 'utf8')),
  );
  if (printed !== expected) {
    throw new Error(`litewitness printed verifier key ${String(printed)}, expected ${expected}`);
  }
  return { procs: [agent, witness], name, url, vkey: expected, db };
}

/** witnessctl's `add-log` and `add-key`: the witness follows `origin`, signed by `logVkey`. */
export async function addLogToWitness(
  witness: Pick<Witness, 'db'>,
  tools: WitnessTools,
  origin: string,
  logVkey: string,
): Promise<void> {
  await run(tools['witness-add-log'], ['-db', witness.db, '-origin', origin, '-key', logVkey]);
}

/** The note key the service signs checkpoints with: an Ed25519 PKCS#8 PEM (under `note.key`). */
export function generateNoteKey(): { pem: string; vkeyOf: (origin: string) => string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  return {
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    vkeyOf: (origin) => formatVkey(origin, SIG_TYPE_ED25519, raw),
  };
}

/** Stores the note key as the Secret TLOG_NOTE_SECRET names (Opaque, key `note.key`). */
export async function createNoteKeySecret(
  kubeconfig: string,
  pem: string,
  namespace = 'aibom-vault-system',
  name = 'aibom-vault-tlog-note',
): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: { metadata: { name }, type: 'Opaque', data: { 'note.key': Buffer.from(pem).toString('base64') } },
  });
}

/**
 * The stack's witness: a litewitness following both logs of the stack's services, whose note key
 * is made here and stored as their TLOG_NOTE_SECRET. Returns the settings the services run with.
 */
export async function startStackWitness(
  root: string,
  tools: WitnessTools,
  kubeconfig: string,
  launch: Launch,
): Promise<{ witness: Witness; settings: Record<string, string>; env: Record<string, string> }> {
  const witness = await startWitness(join(root, 'witness'), tools, { launch });
  const origin = `aibom-vault.stack/${root.split('/').pop() ?? 'stack'}`;
  const note = generateNoteKey();
  await createNoteKeySecret(kubeconfig, note.pem);
  for (const log of ['vault', 'scitt']) {
    const o = `${origin}/v1/tlog/${log}`;
    await addLogToWitness(witness, tools, o, note.vkeyOf(o));
  }
  return {
    witness,
    settings: {
      TLOG_NOTE_SECRET: 'aibom-vault-tlog-note',
      TLOG_ORIGIN: origin,
      TLOG_WITNESSES: `${witness.url} ${witness.vkey}`,
    },
    env: {
      WITNESS_URL: witness.url,
      WITNESS_VKEY: witness.vkey,
      TLOG_VAULT_VKEY: note.vkeyOf(`${origin}/v1/tlog/vault`),
      TLOG_SCITT_VKEY: note.vkeyOf(`${origin}/v1/tlog/scitt`),
    },
  };
}

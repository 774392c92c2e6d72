import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { S3Client } from '../../src/blob/store.ts';
import { freePort, startProcess, waitReady, type Launch, type Proc } from './proc.ts';

/**
 * SeaweedFS (Apache-2.0, built from the Go module proxy: hack/versions.env) as the second
 * S3-compatible store: `weed server` with a master, a volume server, a filer and the S3 gateway in
 * one process, every port random on the loopback (its defaults are fixed ports), no telemetry, no
 * side listeners (Iceberg, Lance), and no bucket created on a first upload (a store that did would
 * hide a missing bucket, which S3 reports as NoSuchBucket). The S3 credentials are its admin
 * identity from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
 */

export interface SeaweedOptions {
  /** PEM files of the S3 listener's certificate and key: it then serves https only. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
}

export interface SeaweedPorts {
  readonly s3: number;
  readonly others: readonly number[];
}

/** Ports of one `weed server`: S3, then master, volume, filer and their gRPC ports, S3's gRPC. */
export async function seaweedPorts(): Promise<SeaweedPorts> {
  const s3 = await freePort();
  const others: number[] = [];
  for (let i = 0; i < 7; i++) others.push(await freePort());
  return { s3, others };
}

/** Starts `weed server` on `<root>/seaweedfs` (also to restart it on the same data dir and ports). */
export async function runSeaweedServer(
  root: string,
  binary: string,
  ports: SeaweedPorts,
  accessKey: string,
  secretKey: string,
  launch: Launch = {},
  opts: SeaweedOptions = {},
): Promise<Proc> {
  const data = join(root, 'seaweedfs');
  await mkdir(data, { recursive: true });
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3Grpc] = ports.others as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const proc = await startProcess({
    name: 'seaweedfs',
    command: binary,
    args: [
      // glog writes files under /tmp unless told otherwise; to stderr, they land in the log file.
      '-logtostderr',
      'server',
      `-dir=${data}`,
      '-ip=127.0.0.1',
      '-ip.bind=127.0.0.1',
      `-master.port=${master}`,
      `-master.port.grpc=${masterGrpc}`,
      '-master.telemetry=false',
      '-master.volumeSizeLimitMB=64',
      `-volume.port=${volume}`,
      `-volume.port.grpc=${volumeGrpc}`,
      '-filer',
      `-filer.port=${filer}`,
      `-filer.port.grpc=${filerGrpc}`,
      `-filer.localSocket=${join(data, 'filer.sock')}`,
      '-s3',
      `-s3.port=${ports.s3}`,
      `-s3.port.grpc=${s3Grpc}`,
      '-s3.port.iceberg=0',
      '-s3.port.lance=0',
      '-s3.autoCreateBucket=false',
      `-s3.localSocket=${join(data, 's3.sock')}`,
      ...(opts.tls ? [`-s3.cert.file=${opts.tls.certFile}`, `-s3.key.file=${opts.tls.keyFile}`] : []),
    ],
    logFile: join(root, 'seaweedfs.log'),
    // TMPDIR: its gRPC servers' unix sockets go to os.TempDir(), and would outlive it under /tmp.
    env: {
      ...process.env,
      AWS_ACCESS_KEY_ID: accessKey,
      AWS_SECRET_ACCESS_KEY: secretKey,
      HOME: data,
      TMPDIR: data,
    },
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  const scheme = opts.tls ? 'https' : 'http';
  await waitReady(
    proc,
    async () => {
      // /healthz answers before the filer and a volume can take objects: probe with one.
      if (opts.tls) return (await fetch(`http://127.0.0.1:${master}/cluster/healthz`)).ok;
      return (await fetch(`${scheme}://127.0.0.1:${ports.s3}/healthz`)).ok;
    },
    60_000,
    launch.signal,
  );
  return proc;
}

export interface Seaweed {
  readonly proc: Proc;
  readonly endpoint: string;
  readonly accessKey: string;
  readonly secretKey: string;
  readonly bucket: string;
  readonly ports: SeaweedPorts;
}

/** SeaweedFS with `bucket` created and writable (an object put, read and deleted). */
export async function startSeaweedfs(
  root: string,
  binary: string,
  bucket: string,
  launch: Launch = {},
  opts: SeaweedOptions & { readonly ca?: string } = {},
): Promise<Seaweed> {
  const ports = await seaweedPorts();
  const accessKey = `stack-${randomBytes(4).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  const proc = await runSeaweedServer(root, binary, ports, accessKey, secretKey, launch, opts);
  const endpoint = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${ports.s3}`;
  const client = new S3Client({ endpoint, accessKey, secretKey, ...(opts.ca ? { ca: opts.ca } : {}) });
  try {
    await waitReady(
      proc,
      async () => {
        await client.createBucket(bucket);
        const probe = `.stack-ready-${randomBytes(4).toString('hex')}`;
        await client.putObject(bucket, probe, Buffer.from('ready'), 'text/plain');
        const ok = (await client.getObject(bucket, probe))?.toString() === 'ready';
        await client.deleteObject(bucket, probe);
        return ok;
      },
      60_000,
      launch.signal,
    );
  } finally {
    client.close();
  }
  return { proc, endpoint, accessKey, secretKey, bucket, ports };
}

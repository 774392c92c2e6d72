/**
 * export: throughput of POST /v1/attestations/export — the sidecar API in a worker thread (as
 * bench/api-server.ts wires it, with the service signer), streaming a bundle of 20,000 ×
 * BENCH_SCALE really signed attestations (every record with its Sigstore bundle, one segment index
 * per 1000, the .intoto.jsonl pass, the index and the bundle's own C2PA manifest) to a client that
 * counts the bytes — vs the baseline: writing the SAME entries (same paths, same bytes, read back
 * from the first export) as a raw tar (ustar headers, padding) with SHA-256 over the whole archive,
 * in the same process, in alternating rounds. Reports MiB/s and attestations/s of both and the
 * ratio (goal ≥ 0.5×). The baseline is the floor of any exporter: it does no database reads, no
 * JSON, no per-entry digests and no signatures.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { generateDevPki } from '../hack/dev-pki.ts';
import { END_OF_ARCHIVE, parseTarHeader, tarHeader, tarPadding } from '../src/export/tar.ts';
import { rememberSigner } from '../src/export/keys.ts';
import { signerFromPem } from '../src/signing/index.ts';
import { createVaultPool, migrate, openVault, type NewAttestation } from '../src/vault/index.ts';
import { startApiServer } from './api-server.ts';
import {
  fmtCount,
  fmtRate,
  fmtRatio,
  goalText,
  printTable,
  scaled,
  verdict,
  type Benchmark,
  type Goal,
  type SummaryRow,
} from './common.ts';
import { buildRecord, type RunShape } from './records.ts';

const GOAL: Goal = { op: '>=', value: 0.5 };
const ROUNDS = 3;
const MiB = 1024 * 1024;

/** One export through HTTP: bytes received and seconds (the body is kept only when asked). */
function exportOnce(
  url: string,
  token: string,
  keep: boolean,
): Promise<{ bytes: number; seconds: number; body?: Buffer }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      `${url}/v1/attestations/export`,
      { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`export answered ${res.statusCode}`));
          res.resume();
          return;
        }
        let bytes = 0;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (keep) parts.push(c);
        });
        res.on('end', () =>
          resolve({
            bytes,
            seconds: (performance.now() - t0) / 1000,
            ...(keep ? { body: Buffer.concat(parts) } : {}),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ namespaces: ['bench-export'] }));
  });
}

/** The baseline: the same entries as a raw tar with SHA-256 over every byte, in 256 KiB chunks. */
function rawTar(entries: readonly { path: string; content: Buffer }[]): { bytes: number; seconds: number } {
  const t0 = performance.now();
  const h = createHash('sha256');
  let parts: Buffer[] = [];
  let pending = 0;
  let bytes = 0;
  const push = (b: Buffer) => {
    parts.push(b);
    pending += b.length;
    if (pending >= 256 * 1024) {
      const chunk = Buffer.concat(parts, pending);
      h.update(chunk);
      bytes += chunk.length;
      parts = [];
      pending = 0;
    }
  };
  for (const e of entries) {
    push(tarHeader(e.path, e.content.length));
    push(e.content);
    push(tarPadding(e.content.length));
  }
  push(END_OF_ARCHIVE);
  const chunk = Buffer.concat(parts, pending);
  h.update(chunk);
  bytes += chunk.length;
  h.digest();
  return { bytes, seconds: (performance.now() - t0) / 1000 };
}

export const exportBenchmark: Benchmark = {
  name: 'export',
  title: 'POST /v1/attestations/export throughput vs raw tar + SHA-256 of the same bytes',
  async run(ctx) {
    const total = scaled(20_000, ctx.scale, 1000);
    const stack = await ctx.stack();
    const env = (name: string): string => {
      const v = stack.env[name];
      if (v === undefined) throw new Error(`the stack reported no ${name}`);
      return v;
    };
    const url = await ctx.freshDatabase('export');
    await migrate(url);
    const pki = await generateDevPki();
    const signer = signerFromPem(pki);
    const pool = createVaultPool(url, { max: 4 });
    const closePool = ctx.track(() => pool.end());
    const vault = await openVault(pool);
    await rememberSigner(vault.signers, signer, { namespace: '', role: 'signer' });
    const t0 = performance.now();
    for (let k = 0; k < total;) {
      const batch: NewAttestation[] = [];
      for (; batch.length < 1000 && k < total; k++) {
        const run: RunShape = {
          namespace: 'bench-export',
          runId: randomUUID(),
          pack: { name: 'baseline', version: '1.0.0' },
        };
        batch.push(buildRecord(signer, run, k % 4));
      }
      await vault.attestations.append(batch);
      ctx.throwIfStopping();
    }
    await closePool();
    ctx.log(
      `export: ${fmtCount(total)} signed records stored in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );

    const api = await startApiServer(ctx, {
      databaseUrl: url,
      kubeconfig: stack.kube.kubeconfigs['aibom-vault'],
      poolMax: 10,
      authTtlMs: 30 * 60_000,
      logLevel: 'info',
      s3: {
        endpoint: env('S3_ENDPOINT'),
        accessKey: env('S3_ACCESS_KEY'),
        secretKey: env('S3_SECRET_KEY'),
        bucket: env('S3_BUCKET'),
      },
      signer: pki,
    });
    const token = stack.kube.tokens.admin;
    // Warm-up export, kept: its entries are the baseline's input.
    const first = await exportOnce(api.url, token, true);
    // Views into the one received buffer (no copies): the main thread, which runs the client, keeps
    // a small heap, as it does while measuring the exports.
    const body = first.body!;
    const entries: { path: string; content: Buffer }[] = [];
    for (let at = 0; ;) {
      const header = parseTarHeader(body.subarray(at, at + 512));
      if (header === null) break;
      entries.push({ path: header.path, content: body.subarray(at + 512, at + 512 + header.size) });
      at += 512 + Math.ceil(header.size / 512) * 512;
    }
    ctx.log(`export: bundle of ${fmtCount(first.bytes)} bytes, ${fmtCount(entries.length)} entries`);

    const api_: { bytes: number; seconds: number }[] = [];
    const raw: { bytes: number; seconds: number }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      ctx.throwIfStopping();
      api_.push(await exportOnce(api.url, token, false));
      raw.push(rawTar(entries));
      raw.push(rawTar(entries));
    }
    await api.close();
    const median = (xs: { bytes: number; seconds: number }[]) => {
      const rates = xs.map((x) => x.bytes / x.seconds).sort((a, b) => a - b);
      return rates[Math.floor(rates.length / 2)]!;
    };
    const apiRate = median(api_);
    const rawRate = median(raw);
    const perRecord = first.bytes / total;
    const ratio = apiRate / rawRate;
    printTable(
      `export: ${fmtCount(total)} attestations, ${(first.bytes / MiB).toFixed(1)} MiB per bundle (median of ${ROUNDS} / ${2 * ROUNDS} rounds)`,
      ['path', 'MiB/s', 'attestations/s'],
      [
        [
          'POST /v1/attestations/export (HTTP, worker thread)',
          (apiRate / MiB).toFixed(1),
          fmtRate(apiRate / perRecord),
        ],
        ['raw tar + SHA-256 of the same entries', (rawRate / MiB).toFixed(1), fmtRate(rawRate / perRecord)],
        ['ratio export / raw', fmtRatio(ratio), ''],
        ['goal', goalText(GOAL), verdict(ratio, GOAL)],
      ],
    );
    const row: SummaryRow = {
      benchmark: 'export',
      case: `${fmtCount(total)} attestations`,
      ratioOf: 'export MiB/s / raw tar+SHA-256 MiB/s',
      ratio,
      goal: GOAL,
    };
    return [row];
  },
};

import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { extract } from 'tar-stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { writeBundle, type ExportItem, type ExportSegment } from '../../../src/export/bundle.ts';
import { Paths } from '../../../src/export/layout.ts';
import type { SpoolOptions } from '../../../src/export/spool.ts';
import { tarHeader, writeTarHeader } from '../../../src/export/tar.ts';
import { logKeyOf } from '../../../src/cose/key.ts';
import { toApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { tarEntries } from '../../helpers/export.ts';
import { openFilesUnder } from '../../helpers/open-files.ts';
import { runRecords, storedRecord } from '../../helpers/records.ts';

/**
 * The writer's streaming machinery (src/export/bundle.ts, tar.ts): entries written in place into
 * chunks, digests taken from the chunks, the `.intoto.jsonl` collected in a spool (memory or temp
 * file) during the one pass, and the audit hook awaited before any byte of its segment leaves. bundle.test.ts checks the format and
 * the verifier; this file checks that how the bytes are produced changes none of them.
 */

let signer: KeySigner;
let items: ExportItem[];
const SEGMENT = 4;

beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
  const chain = signer.certificateChain!;
  const pem = chain.map((c) => c.toString()).join('');
  const records = [1, 2, 3].flatMap(() => runRecords(signer, 'team-a', { runId: randomUUID() }).records);
  items = records.map((r, i): ExportItem => {
    const seq = i + 1;
    const s = storedRecord(r, seq);
    return {
      id: s.id,
      createdAt: s.createdAt,
      namespace: s.namespace,
      envelope: s.envelope,
      view: toApiEnvelope(s),
      signer: {
        ref: s.signature.cert_chain_ref!,
        keyId: s.signature.key_id,
        pem,
        certificate: chain[0]!,
      },
      // A receipt on one record, and an AIBOM larger than most chunk sizes below on another, with
      // non-ASCII metadata: every path of the writer (copied, passed on, text, bytes).
      ...(i === 1 ? { scitt: { statement: Buffer.alloc(700, 1), receipt: Buffer.alloc(90, 2) } } : {}),
      ...(i === 2
        ? {
            aibom: {
              runId: s.runId!,
              objectKey: `aibom/${s.runId!}/aibom.json`,
              attestationIds: [s.id],
              bytes: Buffer.alloc(70_000, 'a'),
              manifest: Buffer.alloc(3000, 'm'),
              metadata: { name: 'modèle ✓', size: 70_000 },
              manifestDigest: `sha256:${'1'.repeat(64)}`,
            },
          }
        : {}),
    };
  });
});

interface Run {
  readonly bytes: Buffer;
  /** Bytes the consumer had received when each segment's audit hook returned, by segment number. */
  readonly receivedAtAudit: Map<number, number>;
}

interface RunOptions {
  chunkSize?: number;
  lazyViews?: boolean;
  auditDelayMs?: number;
  spool?: SpoolOptions;
}

/** The writer over `segments`; `audited` is called as each segment's audit hook returns. */
function bundleOf(
  opts: RunOptions,
  segments: AsyncIterable<ExportSegment>,
  audited: (segment: number) => void = () => undefined,
): AsyncGenerator<Buffer> {
  return writeBundle({
    segments,
    logKeys: [{ key: logKeyOf(signer.publicKey) }],
    service: { name: 'aibom-vault', version: 'test' },
    selection: { namespaces: ['team-a'] },
    signer: signer.deterministic(),
    claimGenerator: 'aibom-vault/0.1.0',
    beforeSegment: async (s) => {
      if (opts.auditDelayMs !== undefined) await new Promise((r) => setTimeout(r, opts.auditDelayMs));
      audited(s.segment);
    },
    ...(opts.chunkSize !== undefined ? { chunkSize: opts.chunkSize } : {}),
    ...(opts.spool !== undefined ? { spool: opts.spool } : {}),
  });
}

function segmentsOf(list: readonly ExportItem[]): ExportSegment[] {
  const segments: ExportSegment[] = [];
  for (let i = 0; i < list.length; i += SEGMENT) {
    segments.push({ items: list.slice(i, i + SEGMENT), scittEnqueued: [] });
  }
  return segments;
}

async function run(opts: RunOptions = {}): Promise<Run> {
  const list = opts.lazyViews === true ? items.map((i) => ({ ...i, view: () => i.view })) : items;
  let received = 0;
  const receivedAtAudit = new Map<number, number>();
  const chunks: Buffer[] = [];
  for await (const c of bundleOf(opts, Readable.from(segmentsOf(list)), (n) =>
    receivedAtAudit.set(n, received),
  )) {
    chunks.push(c);
    received += c.length;
  }
  return { bytes: Buffer.concat(chunks), receivedAtAudit };
}

describe('bundle writer', () => {
  it('writes the same bytes whatever the chunk size, with views given or built on demand', async () => {
    const reference = (await run()).bytes;
    for (const chunkSize of [512, 1000, 4096, 65_536, 8 * 1024 * 1024]) {
      for (const lazyViews of [false, true]) {
        const { bytes } = await run({ chunkSize, lazyViews });
        expect(bytes.equals(reference), `chunkSize ${chunkSize}, lazy views ${lazyViews}`).toBe(true);
      }
    }
  });

  it('writes the same bytes whether the .intoto.jsonl stays in memory or spills to a temp file', async () => {
    const reference = (await run()).bytes;
    const parent = await mkdtemp(join(tmpdir(), 'writer-spool-test-'));
    try {
      // No memory at all and tiny blocks: the spool spills from the first record on, and the
      // pieces read back from the file end anywhere in a line and anywhere in a chunk.
      for (const chunkSize of [512, 1000, 65_536]) {
        for (const blockSize of [7, 100, 4096]) {
          const { bytes } = await run({ chunkSize, spool: { memoryLimit: 0, blockSize, dir: parent } });
          expect(bytes.equals(reference), `chunkSize ${chunkSize}, blockSize ${blockSize}`).toBe(true);
          expect(await readdir(parent)).toEqual([]);
          expect(await openFilesUnder(parent)).toEqual([]);
        }
      }
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  });

  it('closes the temp file (which has no name) when the consumer stops early or a source fails', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'writer-spool-test-'));
    const spool = { memoryLimit: 0, blockSize: 100, dir: parent };
    try {
      // The consumer goes away (client abort) while the spool has a file.
      let sawFile = false;
      for await (const _ of bundleOf({ chunkSize: 512, spool }, Readable.from(segmentsOf(items)))) {
        if ((await openFilesUnder(parent)).length > 0) {
          sawFile = true;
          break;
        }
      }
      expect(sawFile).toBe(true);
      expect(await readdir(parent)).toEqual([]);
      expect(await openFilesUnder(parent)).toEqual([]);

      // The records source fails after the spool has a file.
      const failing = async function* (): AsyncGenerator<ExportSegment> {
        const [first, ...rest] = segmentsOf(items);
        yield first!;
        expect(await openFilesUnder(parent)).toHaveLength(1);
        if (rest.length > 0) throw new Error('the database went away');
      };
      await expect(async () => {
        for await (const _ of bundleOf({ chunkSize: 512, spool }, failing())) void _;
      }).rejects.toThrow('the database went away');
      expect(await readdir(parent)).toEqual([]);
      expect(await openFilesUnder(parent)).toEqual([]);
    } finally {
      await rm(parent, { recursive: true, force: true });
    }
  });

  it('releases no byte of a segment before its audit hook has returned', async () => {
    // Small chunks: a segment spans many of them, so a writer that released full chunks as it went
    // would hand out part of a segment before its audit rows existed.
    const { bytes, receivedAtAudit } = await run({ chunkSize: 1024, auditDelayMs: 5 });
    const entries = await tarEntries(bytes);
    // Segment n starts after the previous segment's index (the first one after the log keys).
    const end = (e: { offset: number; content: Buffer }) =>
      e.offset + 512 + Math.ceil(e.content.length / 512) * 512;
    const starts = new Map<number, number>([[1, end(entries.find((e) => e.path === Paths.logKeys)!)]]);
    for (const e of entries) {
      if (e.path.startsWith('index/')) starts.set(starts.size + 1, end(e));
    }
    const segments = Math.ceil(items.length / SEGMENT);
    expect(receivedAtAudit.size).toBe(segments);
    for (let s = 1; s <= segments; s++) {
      expect(receivedAtAudit.get(s), `segment ${s}`).toBeLessThanOrEqual(starts.get(s)!);
    }
  });
});

describe('tar headers written in place', () => {
  const cases: [string, number, string][] = [
    ['index.json', 0, 'bb2d9bbf6e08bc3fa15934cf26435a8ded1d0b577619ce6c685df407b079e6dd'],
    [
      'attestations/0190a5c8-0000-7000-8000-000000000001/envelope.json',
      2725,
      'cc88bfcad784e54aba4f2e286b4dde8c813f3f9759be1a6bded7f6911231aee3',
    ],
    [
      `${'a'.repeat(90)}/${'b'.repeat(90)}`,
      12345,
      '27ce42cd672f981574e5131588b99b988ba92495893d1f392cc5a04629d7f8ed',
    ],
    [
      'attestations.intoto.jsonl',
      9 * 1024 ** 3,
      '189eaa37ddd3b620c418c70f29bbe29dfd91f4d255f1bcabe35cc929e6ab3fcb',
    ],
  ];

  it('are the bytes of the first release (pinned), read back by tar-stream, whatever the buffer held', async () => {
    for (const [path, size, sha256] of cases) {
      // A dirty buffer: every byte of the block must be written, and none outside it.
      const target = Buffer.alloc(2048, 0xa5);
      writeTarHeader(target, 700, path, size);
      const block = target.subarray(700, 1212);
      expect(createHash('sha256').update(block).digest('hex'), path).toBe(sha256);
      expect(block.equals(tarHeader(path, size))).toBe(true);
      expect(target.subarray(0, 700).every((b) => b === 0xa5)).toBe(true);
      expect(target.subarray(1212).every((b) => b === 0xa5)).toBe(true);
      if (size < 1024 ** 3) {
        const ex = extract();
        const seen = new Promise<{ name: string; size?: number; mode?: number; uid?: number }>(
          (resolve, reject) => {
            ex.on('entry', (header, stream, next) => {
              resolve(header);
              stream.resume();
              next();
            });
            ex.on('error', reject);
          },
        );
        ex.write(Buffer.concat([block, Buffer.alloc(Math.ceil(size / 512) * 512 + 1024)]));
        expect(await seen).toMatchObject({ name: path, size, mode: 0o644, uid: 0, gid: 0 });
      }
    }
    expect(() => writeTarHeader(Buffer.alloc(600), 100, 'a', 1)).toThrow(RangeError);
  });
});

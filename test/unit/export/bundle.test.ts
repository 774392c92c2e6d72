import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { extract } from 'tar-stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { writeBundle, type ExportItem, type ExportSegment } from '../../../src/export/bundle.ts';
import { Paths } from '../../../src/export/layout.ts';
import { verifyBundle } from '../../../src/export/verify.ts';
import { logKeyOf } from '../../../src/cose/key.ts';
import { toApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { splitBundle } from '../../helpers/export.ts';
import { runRecords, storedRecord } from '../../helpers/records.ts';

/**
 * The export bundle, writer against verifier, without a stack: the same inputs give the same
 * bytes, an independent tar reader (tar-stream) reads the archive, and one changed byte anywhere
 * makes the verifier fail and name the entry that holds it.
 */

let signer: KeySigner;
let anchors: KeySigner['caCertificates'];
let items: ExportItem[];

beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
  anchors = signer.caCertificates;
  const records = [
    ...runRecords(signer, 'team-a', { runId: randomUUID() }).records,
    ...runRecords(signer, 'team-a', { runId: randomUUID() }).records,
  ];
  const chain = signer.certificateChain!;
  items = records.map((r, i) => {
    const s = storedRecord(r, i + 1);
    return {
      id: s.id,
      createdAt: s.createdAt,
      namespace: s.namespace,
      envelope: s.envelope,
      view: toApiEnvelope(s),
      signer: {
        ref: s.signature.cert_chain_ref!,
        keyId: s.signature.key_id,
        pem: chain.map((c) => c.toString()).join(''),
        certificate: chain[0]!,
      },
    };
  });
});

async function bundle(segmentSize = 4): Promise<Buffer> {
  const segments: ExportSegment[] = [];
  for (let i = 0; i < items.length; i += segmentSize) {
    segments.push({ items: items.slice(i, i + segmentSize), scittEnqueued: [] });
  }
  const chunks: Buffer[] = [];
  for await (const c of writeBundle({
    segments: Readable.from(segments),
    logKeys: [
      {
        key: logKeyOf(signer.publicKey),
        chainPem: signer.certificateChain!.map((c) => c.toString()).join(''),
      },
    ],
    service: { name: 'aibom-vault', version: 'test' },
    selection: { namespaces: ['team-a'] },
    signer: signer.deterministic(),
    claimGenerator: 'aibom-vault/0.1.0',
    chunkSize: 1000,
  })) {
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

const verify = (bytes: Buffer) => verifyBundle(Readable.from([bytes]), { trustAnchors: anchors });

/** Entry paths and content offsets, read by an independent implementation. */
async function entriesOf(bytes: Buffer): Promise<{ path: string; size: number }[]> {
  const out: { path: string; size: number }[] = [];
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      out.push({ path: header.name, size: header.size ?? 0 });
      stream.on('end', next);
      stream.resume();
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(bytes);
  await done;
  return out;
}

describe('export bundle', () => {
  it('is the same bytes for the same inputs, in the documented layout, and verifies', async () => {
    const a = await bundle();
    const b = await bundle();
    expect(a.equals(b)).toBe(true);
    const entries = await entriesOf(a);
    const paths = entries.map((e) => e.path);
    expect(paths[0]).toBe(Paths.logKeys);
    expect(paths.at(-1)).toBe(Paths.manifest);
    expect(paths.at(-2)).toBe(Paths.index);
    expect(paths.at(-3)).toBe(Paths.intotoJsonl);
    expect(paths.filter((p) => p.startsWith('index/'))).toEqual(['index/000001.json', 'index/000002.json']);
    for (const i of items) {
      expect(paths).toContain(Paths.envelope(i.id));
      expect(paths).toContain(Paths.sigstore(i.id));
    }
    const result = await verify(a);
    expect(result.problems).toEqual([]);
    expect(result).toMatchObject({ ok: true, attestations: items.length });
  });

  it('names the entry holding any changed byte (content, header, padding, index, manifest)', async () => {
    const good = await bundle();
    // Walk the archive: for every entry, flip one byte in its content and one in its header.
    let offset = 0;
    const targets: { at: number; entry: string; what: string }[] = [];
    for (const e of await entriesOf(good)) {
      targets.push({ at: offset + 100, entry: e.path, what: 'header' });
      if (e.size > 0)
        targets.push({ at: offset + 512 + Math.floor(e.size / 2), entry: e.path, what: 'content' });
      const pad = (512 - (e.size % 512)) % 512;
      if (pad > 0) targets.push({ at: offset + 512 + e.size, entry: e.path, what: 'padding' });
      offset += 512 + e.size + pad;
    }
    expect(targets.length).toBeGreaterThan(50);
    for (const t of targets) {
      const bad = Buffer.from(good);
      bad[t.at] = bad[t.at]! ^ 0x01;
      const result = await verify(bad);
      expect(result.ok, `${t.what} of ${t.entry}`).toBe(false);
      expect(
        result.problems.map((p) => p.entry),
        `${t.what} of ${t.entry}: ${JSON.stringify(result.problems)}`,
      ).toContain(t.entry);
    }
    // The end-of-archive blocks too.
    const bad = Buffer.from(good);
    bad[bad.length - 10] = 1;
    expect((await verify(bad)).problems.map((p) => p.code)).toContain('MALFORMED_ARCHIVE');
  });

  it('trusts nothing the bundle brings: another CA fails every record', async () => {
    const other = signerFromPem(await generateDevPki());
    const result = await verifyBundle(Readable.from([await bundle()]), {
      trustAnchors: other.caCertificates,
    });
    expect(result.ok).toBe(false);
    for (const i of items) {
      expect(
        result.problems.some((p) => p.entry === Paths.envelope(i.id) && p.code === 'UNTRUSTED_KEY'),
      ).toBe(true);
    }
    expect(result.problems.some((p) => p.entry === Paths.manifest)).toBe(true);
  });
});

describe('the bundle manifest, read by c2pa-rs', () => {
  it('is Trusted over the archive bytes before its own entry, and Invalid after one changed byte', async () => {
    const { Reader } = await import('@contentauth/c2pa-node');
    const bytes = await bundle();
    const { prefix, manifest } = await splitBundle(bytes);
    const read = async (asset: Buffer, mimeType: string) => {
      const reader = await Reader.fromManifestDataAndAsset(
        manifest,
        { buffer: asset, mimeType },
        {
          trust: { trust_anchors: anchors.map((c) => c.toString()).join('') },
          verify: { verify_trust: true },
        },
      );
      return reader.json() as { validation_state?: string };
    };
    expect((await read(prefix, 'application/x-tar')).validation_state).toBe('Trusted');
    const bad = Buffer.from(prefix);
    bad[700] = bad[700]! ^ 1;
    expect((await read(bad, 'application/x-tar')).validation_state).toBe('Invalid');
  });
});

describe('tar headers', () => {
  it('are what GNU-compatible readers expect, and refuse paths that could escape or are not ASCII', async () => {
    const { tarHeader, parseTarHeader } = await import('../../../src/export/tar.ts');
    const long = `${'a'.repeat(90)}/${'b'.repeat(90)}`;
    expect(parseTarHeader(tarHeader(long, 12345))).toEqual({ path: long, size: 12345, type: '0' });
    const huge = 9 * 1024 ** 3;
    expect(parseTarHeader(tarHeader('big', huge))?.size).toBe(huge);
    for (const bad of ['', '/abs', '../x', 'a/../b', 'a/..', 'sp ace', 'é']) {
      expect(() => tarHeader(bad, 1), bad).toThrow();
    }
    expect(() => tarHeader('a..b/c..', 1)).not.toThrow();
  });
});

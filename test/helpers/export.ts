import { Readable } from 'node:stream';
import { extract } from 'tar-stream';
import { logKeyOf } from '../../src/cose/key.ts';
import { writeBundle } from '../../src/export/bundle.ts';
import { toApiEnvelope } from '../../src/http/views/envelope.ts';
import type { KeySigner } from '../../src/signing/index.ts';
import { runRecords, storedRecord } from './records.ts';

/** Every entry of a tar, read by an independent implementation (tar-stream), with its offset. */
export async function tarEntries(
  bytes: Buffer,
): Promise<{ path: string; content: Buffer; offset: number }[]> {
  const out: { path: string; content: Buffer; offset: number }[] = [];
  let offset = 0;
  const ex = extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      const parts: Buffer[] = [];
      stream.on('data', (c: unknown) => parts.push(c as Buffer));
      stream.on('end', () => {
        const content = Buffer.concat(parts);
        out.push({ path: header.name, content, offset });
        offset += 512 + Math.ceil(content.length / 512) * 512;
        next();
      });
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(bytes);
  await done;
  return out;
}

/** The archive before the header of bundle.c2pa (the bytes its data hash covers), and the manifest. */
export async function splitBundle(bytes: Buffer): Promise<{ prefix: Buffer; manifest: Buffer }> {
  const last = (await tarEntries(bytes)).find((e) => e.path === 'bundle.c2pa');
  if (last === undefined) throw new Error('no bundle.c2pa');
  return { prefix: bytes.subarray(0, last.offset), manifest: last.content };
}

/**
 * An export bundle (the writer's bytes) of the records of one run that `recordSigner` signed for
 * `namespace`, each with its signer's chain as the export carries it; the bundle itself is signed
 * by `bundleSigner` (default: the record signer), whose key is also the log key.
 */
export async function recordsBundle(
  recordSigner: KeySigner,
  namespace: string,
  opts: { bundleSigner?: KeySigner; createdAt?: (i: number) => Date } = {},
): Promise<Buffer> {
  const chain = recordSigner.certificateChain!;
  const items = runRecords(recordSigner, namespace).records.map((r, i) => {
    const stored = storedRecord(r, i + 1, opts.createdAt ? { createdAt: opts.createdAt(i) } : {});
    return {
      id: stored.id,
      createdAt: stored.createdAt,
      namespace: stored.namespace,
      envelope: stored.envelope,
      view: toApiEnvelope(stored),
      signer: {
        ref: stored.signature.cert_chain_ref!,
        keyId: stored.signature.key_id,
        pem: chain.map((c) => c.toString()).join(''),
        certificate: chain[0]!,
      },
    };
  });
  const bundleSigner = opts.bundleSigner ?? recordSigner;
  const chunks: Buffer[] = [];
  for await (const c of writeBundle({
    segments: Readable.from([{ items, scittEnqueued: [] }]),
    logKeys: [{ key: logKeyOf(bundleSigner.publicKey) }],
    service: { name: 'aibom-vault', version: 'test' },
    selection: { namespaces: [namespace] },
    signer: bundleSigner.deterministic(),
    claimGenerator: 'aibom-vault/0.1.0',
  })) {
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

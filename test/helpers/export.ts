import { extract } from 'tar-stream';

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

/**
 * The service's S3 client (src/blob/s3.ts) against the stack's S3-compatible store: MinIO in the
 * `integration` project, SeaweedFS in `integration-seaweedfs`. What it relies on must hold on both:
 * signatures over any key, user metadata, overwrite, missing objects and buckets, refused
 * credentials, and that nothing half-written becomes an object (a body other than the one signed,
 * an upload cut off half-way).
 */
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { encodeKey, sha256Hex, signRequest } from '../../../src/blob/sigv4.ts';
import { ObjectStoreRequestError, s3BlobStore, S3Client } from '../../../src/blob/store.ts';
import { stackS3 } from '../../helpers/controller-process.ts';
import { stack, uniqueName } from '../../helpers/stack.ts';

const server = stack().servers?.s3 ?? 'minio';
const s3 = () => stackS3();

/** A PUT signed for `signed` but sending `sent` (same length); optionally cut after `cutAfter` bytes. */
function rawPut(key: string, signed: Buffer, sent: Buffer, cutAfter?: number): Promise<number | 'cut'> {
  const { endpoint, accessKey, secretKey, bucket } = s3();
  const url = new URL(endpoint);
  const path = `/${bucket}/${encodeKey(key)}`;
  const headers = { 'content-length': String(signed.length), 'content-type': 'application/json' };
  const auth = signRequest(
    { method: 'PUT', host: url.host, path, headers, payloadSha256: sha256Hex(signed) },
    { accessKey, secretKey, region: 'us-east-1' },
    new Date(),
  );
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'PUT',
        path,
        headers: { ...headers, host: url.host, ...auth },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', (err) => (cutAfter !== undefined ? resolve('cut') : reject(err)));
    if (cutAfter === undefined) {
      req.end(sent);
    } else {
      req.write(sent.subarray(0, cutAfter), () => setTimeout(() => req.destroy(), 200));
    }
  });
}

describe(`the S3 client against ${server}`, () => {
  it('stores, reads, states and deletes objects under any key, with user metadata; a put overwrites', async () => {
    const store = s3BlobStore(s3());
    const client = new S3Client(s3());
    const prefix = uniqueName('s3');
    for (const name of ['plain.json', "a b+c!'()*~.json", 'é/ü/日本.json', 'per%cent&amp=eq?.json']) {
      const key = `${prefix}/${name}`;
      const body = Buffer.from(JSON.stringify({ name }));
      await store.put(key, body, 'application/json', { kind: 'aibom', digest: `sha256:${sha256Hex(body)}` });
      expect((await store.get(key))?.equals(body), key).toBe(true);
      expect(await store.stat(key)).toMatchObject({
        key,
        size: body.length,
        metadata: { kind: 'aibom', digest: `sha256:${sha256Hex(body)}` },
      });
      await client.deleteObject(s3().bucket, key);
      expect(await store.get(key), key).toBeNull();
      expect(await store.stat(key), key).toBeNull();
    }
    const key = `${prefix}/twice.json`;
    await store.put(key, Buffer.from('{"v":1}'), 'application/json');
    await store.put(key, Buffer.from('{"v":2}'), 'application/json');
    expect((await store.get(key))?.toString()).toBe('{"v":2}');
    const big = randomBytes(1024 * 1024 + 7);
    await store.put(`${prefix}/big.bin`, big, 'application/octet-stream');
    expect((await store.get(`${prefix}/big.bin`))?.equals(big)).toBe(true);
    await store.ping();
    client.close();
  });

  it('lists the keys under a prefix, page by page, with the keys as they were put', async () => {
    const store = s3BlobStore(s3());
    const client = new S3Client(s3());
    const prefix = `${uniqueName('s3list')}/`;
    const names = ['plain.json', "a b+c!'()*~.json", 'é/ü/日本.json', 'per%cent&amp=eq?<x>.json', 'z.c2pa'];
    for (const name of names) await store.put(`${prefix}${name}`, Buffer.from(name), 'application/json');
    await store.put(`${prefix.slice(0, -1)}-beside/not-under.json`, Buffer.from('x'), 'application/json');
    const want = names.map((n) => `${prefix}${n}`).sort();
    expect((await store.list(prefix)).sort()).toEqual(want);
    // Two keys a page: three pages, each continuation token sent back as the store gave it.
    expect((await client.listObjects(s3().bucket, prefix, 2)).sort()).toEqual(want);
    expect(await store.list(`${prefix}nothing-here/`)).toEqual([]);
    await store.delete(`${prefix}z.c2pa`);
    await store.delete(`${prefix}z.c2pa`);
    expect((await store.list(prefix)).sort()).toEqual(want.filter((k) => !k.endsWith('z.c2pa')));
    client.close();
  });

  it('a missing bucket and wrong credentials are refused requests, not outages', async () => {
    const missing = await s3BlobStore({ ...s3(), bucket: 'no-such-bucket-here' })
      .put('k', Buffer.from('x'), 'text/plain')
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ObjectStoreRequestError);
    expect(missing).toMatchObject({ status: 404, s3Code: 'NoSuchBucket' });
    const denied = await s3BlobStore({ ...s3(), secretKey: 'not-the-secret' })
      .get('k')
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(ObjectStoreRequestError);
    expect((denied as ObjectStoreRequestError).status).toBe(403);
  });

  it('nothing half-written becomes an object: a body other than the one signed, an upload cut off', async () => {
    const store = s3BlobStore(s3());
    const prefix = uniqueName('s3-half');
    const signed = Buffer.from(JSON.stringify({ aibom: 'a'.repeat(4000) }));
    const other = Buffer.from(signed.toString().replace('a'.repeat(10), 'b'.repeat(10)));
    expect(other.length).toBe(signed.length);
    expect(other.equals(signed)).toBe(false);
    const status = await rawPut(`${prefix}/changed.json`, signed, other);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(await store.stat(`${prefix}/changed.json`)).toBeNull();
    // Sanity: the same request with the body it signed is stored.
    expect(await rawPut(`${prefix}/whole.json`, signed, signed)).toBe(200);
    expect((await store.get(`${prefix}/whole.json`))?.equals(signed)).toBe(true);
    // Cut half-way: the store never shows an object (or the half of one).
    await rawPut(`${prefix}/cut.json`, signed, signed, 2000);
    await new Promise((r) => setTimeout(r, 500));
    expect(await store.stat(`${prefix}/cut.json`)).toBeNull();
  });
});

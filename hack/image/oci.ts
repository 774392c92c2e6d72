import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256, type Layer } from './layer.ts';

/** What the image runs as and with; the rest of the config is fixed (linux/amd64, epoch times). */
export interface ImageConfig {
  readonly user: string;
  readonly env: readonly string[];
  readonly workingDir: string;
  readonly cmd: readonly string[];
  readonly exposedPorts: readonly number[];
  readonly labels: Record<string, string>;
  /** One `created_by` line per layer, in order. */
  readonly history: readonly string[];
}

export interface Image {
  readonly manifestDigest: string;
  readonly manifest: Buffer;
  readonly config: Buffer;
  readonly layers: readonly Layer[];
}

const EPOCH = '1970-01-01T00:00:00Z';
const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

/** The image config and manifest (OCI image spec v1.1) over `layers`, serialised once. */
export function assemble(layers: readonly Layer[], c: ImageConfig): Image {
  if (c.history.length !== layers.length) throw new Error('one history line per layer');
  const config = json({
    created: EPOCH,
    architecture: 'amd64',
    os: 'linux',
    config: {
      User: c.user,
      Env: c.env,
      WorkingDir: c.workingDir,
      Cmd: c.cmd,
      ExposedPorts: Object.fromEntries(c.exposedPorts.map((p) => [`${p}/tcp`, {}])),
      Labels: c.labels,
    },
    rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
    history: c.history.map((created_by) => ({ created: EPOCH, created_by })),
  });
  const manifest = json({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: {
      mediaType: 'application/vnd.oci.image.config.v1+json',
      digest: sha256(config),
      size: config.length,
    },
    layers: layers.map((l) => ({
      mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
      digest: l.digest,
      size: l.gz.length,
    })),
    annotations: c.labels,
  });
  return { manifestDigest: sha256(manifest), manifest, config, layers };
}

/**
 * Writes an OCI image layout (oci-layout, index.json, blobs/sha256/*) to `dir`, atomically: it is
 * built beside and renamed into place. `tag` becomes the index's org.opencontainers.image.ref.name.
 */
export async function writeLayout(dir: string, image: Image, tag: string): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  const blobs = join(tmp, 'blobs', 'sha256');
  await mkdir(blobs, { recursive: true });
  const put = (digest: string, data: Buffer) => writeFile(join(blobs, digest.slice('sha256:'.length)), data);
  for (const l of image.layers) await put(l.digest, l.gz);
  await put(sha256(image.config), image.config);
  await put(image.manifestDigest, image.manifest);
  await writeFile(join(tmp, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  await writeFile(
    join(tmp, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest: image.manifestDigest,
          size: image.manifest.length,
          annotations: { 'org.opencontainers.image.ref.name': tag },
        },
      ],
    }),
  );
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
}

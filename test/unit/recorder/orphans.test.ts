import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { removeOrphanSidecars, type SidecarSweep } from '../../../src/recorder/orphans.ts';
import { FakeBlobs } from '../../helpers/fakes.ts';

const logger = pino({ level: 'silent' });
const prefix = 'runs/ns/11111111-2222-4333-8444-555555555555/';
const digest = `sha256:${'a'.repeat(64)}`;
const sweep = (over: Partial<SidecarSweep> = {}): SidecarSweep => ({
  prefix,
  aibomDigest: digest,
  ownKey: `${prefix}aibom.0000000000000001.c2pa`,
  namedKey: `${prefix}aibom.0000000000000001.c2pa`,
  created: true,
  ...over,
});

async function bucket(): Promise<FakeBlobs> {
  const b = new FakeBlobs();
  const put = (k: string, m: Record<string, string>) => b.put(`${prefix}${k}`, Buffer.from(k), 'x', m);
  await put('aibom.json', { digest });
  await put('aibom.0000000000000001.c2pa', { digest, 'manifest-digest': 'sha256:1' });
  await put('aibom.0000000000000002.c2pa', { digest, 'manifest-digest': 'sha256:2' });
  await put('aibom.0000000000000003.c2pa', { digest: `sha256:${'b'.repeat(64)}` });
  await put('aibom.0000000000000004.c2pa', { digest, 'repair-id': 'r' });
  await b.put('runs/ns/other/aibom.0000000000000005.c2pa', Buffer.from('o'), 'x', { digest });
  return b;
}

describe('removeOrphanSidecars', () => {
  it('the stored writer removes only the sidecars of its bytes that no record names', async () => {
    const b = await bucket();
    expect(await removeOrphanSidecars(b, sweep(), logger)).toEqual([`${prefix}aibom.0000000000000002.c2pa`]);
    expect([...b.objects.keys()].sort()).toEqual(
      [
        `${prefix}aibom.json`,
        `${prefix}aibom.0000000000000001.c2pa`,
        `${prefix}aibom.0000000000000003.c2pa`,
        `${prefix}aibom.0000000000000004.c2pa`,
        'runs/ns/other/aibom.0000000000000005.c2pa',
      ].sort(),
    );
  });

  it('a loser removes its own sidecar only, and nothing when its own is the one named', async () => {
    const b = await bucket();
    const own = `${prefix}aibom.0000000000000002.c2pa`;
    expect(await removeOrphanSidecars(b, sweep({ created: false, ownKey: own }), logger)).toEqual([own]);
    expect(b.objects.size).toBe(5);
    expect(await removeOrphanSidecars(b, sweep({ created: false }), logger)).toEqual([]);
    expect(b.objects.size).toBe(5);
  });

  it('a store that refuses is no failure of the record: the orphans stay', async () => {
    const b = await bucket();
    b.failNext = new Error('AccessDenied');
    expect(await removeOrphanSidecars(b, sweep(), logger)).toEqual([]);
    expect(b.objects.size).toBe(6);
  });
});

import { hash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { manifestEntry } from '../../../src/verify/entries/manifest.ts';
import { ARCHIVE, BundleState } from '../../../src/verify/index.ts';
import { splitBundle } from '../../helpers/export.ts';
import { contentOf, feed, fixture, found, optionsOf, type Fixture } from './fixtures.ts';

/**
 * bundle.c2pa alone (entries/manifest.ts): signed by a signer chaining to the anchors, over the
 * archive prefix (its data hash) and naming index.json's digest.
 */
let f: Fixture;
let manifest: Buffer;
let prefixDigest: Buffer;
let indexSha: string;

beforeAll(async () => {
  f = await fixture();
  const split = await splitBundle(f.bytes);
  manifest = split.manifest;
  prefixDigest = hash('sha256', split.prefix, 'buffer');
  indexSha = hash('sha256', contentOf(f, 'index.json').content);
});

function check(options = optionsOf(f), edit: (s: BundleState) => void = () => {}): BundleState {
  const s = new BundleState(options);
  s.prefixDigest = prefixDigest;
  s.indexSha = indexSha;
  edit(s);
  feed(s, manifestEntry, 'bundle.c2pa', manifest);
  return s;
}

describe('bundle.c2pa', () => {
  it('verifies over the prefix and names the index; afterwards nothing may follow', () => {
    const s = check();
    expect(s.problems).toEqual([]);
    expect(s.afterManifest).toBe(true);
    manifestEntry.end!(s);
    expect(s.problems).toEqual([]);
  });

  it('another index.json than the one signed: DIGEST_MISMATCH against index.json', () => {
    expect(found(check(undefined, (s) => (s.indexSha = 'ab'.repeat(32))))).toEqual([
      'index.json DIGEST_MISMATCH',
    ]);
  });

  it('changed archive bytes: against the archive when nothing else saw them, against the manifest otherwise', () => {
    const changed = hash('sha256', 'other', 'buffer');
    expect(check(undefined, (s) => (s.prefixDigest = changed)).problems).toEqual([
      {
        entry: ARCHIVE,
        code: 'C2PA_DATA_HASH_MISMATCH',
        message: 'the archive bytes before the manifest do not match its data hash',
      },
    ]);
    const s = check(undefined, (x) => {
      x.prefixDigest = changed;
      x.fail('index/000001.json', 'DIGEST_MISMATCH', 'seen');
    });
    expect(found(s)).toEqual(['index/000001.json DIGEST_MISMATCH', 'bundle.c2pa C2PA_DATA_HASH_MISMATCH']);
  });

  it('signed under another CA: C2PA problem, and the index claim is not believed', async () => {
    const other = signerFromPem(await generateDevPki());
    const s = check({ trustAnchors: other.caCertificates }, (x) => (x.indexSha = 'ab'.repeat(32)));
    expect(found(s).every((p) => p.startsWith('bundle.c2pa C2PA_'))).toBe(true);
    expect(s.problems.length).toBeGreaterThan(0);
  });

  it('not a manifest store: MALFORMED_MANIFEST; absent: MISSING', () => {
    const s = new BundleState(optionsOf(f));
    s.prefixDigest = prefixDigest;
    feed(s, manifestEntry, 'bundle.c2pa', Buffer.from('garbage'));
    expect(found(s)).toEqual(['bundle.c2pa C2PA_MALFORMED_MANIFEST']);
    const none = new BundleState(optionsOf(f));
    manifestEntry.end!(none);
    expect(found(none)).toEqual(['bundle.c2pa MISSING']);
  });
});

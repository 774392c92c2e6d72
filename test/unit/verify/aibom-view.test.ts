import { beforeAll, describe, expect, it } from 'vitest';
import { Paths } from '../../../src/export/layout.ts';
import { aibomEntry } from '../../../src/verify/entries/aibom.ts';
import { aibomViewEntry } from '../../../src/verify/entries/aibom-view.ts';
import { envelopeEntry } from '../../../src/verify/entries/envelope.ts';
import { signerCertEntry } from '../../../src/verify/entries/keys.ts';
import { sigstoreEntry } from '../../../src/verify/entries/sigstore.ts';
import type { BundleState } from '../../../src/verify/index.ts';
import { contentOf, feed, fixture, freshState, optionsOf, type Fixture } from './fixtures.ts';

/**
 * `runs/<run>/aibom.cdx-1.7.json` and `aibom.spdx-3.0.1.json` alone (entries/aibom-view.ts): each
 * right after its own view record, checked when that record closes, against its AIBOM when the
 * bundle brought it first, else only against the digest its record signs.
 */
let f: Fixture;
let runId: string;
let aibomId: string;
const VIEWS = ['aibom.cdx-1.7.json', 'aibom.spdx-3.0.1.json'] as const;
const viewIds = new Map<string, string>();

beforeAll(async () => {
  f = await fixture();
  const aibom = [...f.views.values()].find((v) => v.kind === 'aibom')!;
  aibomId = aibom.id;
  runId = aibom.run_id!;
  for (const item of f.items) if (item.aibomView !== undefined) viewIds.set(item.aibomView.name, item.id);
});

const viewPath = (name: string) => Paths.aibomView(runId, name);
/** The problems of the view files only (the records' other files are the other handlers'). */
const viewProblems = (s: BundleState) =>
  s.problems.filter((p) => VIEWS.some((n) => p.entry === viewPath(n))).map((p) => `${p.entry} ${p.code}`);

async function open(s: BundleState, id: string): Promise<void> {
  s.closeRecord();
  feed(s, envelopeEntry, Paths.envelope(id), contentOf(f, Paths.envelope(id)).content);
  await s.settle();
}

/** A state that has read the signer chain and, unless `withAibom` is false, the run's AIBOM. */
async function stateWith(withAibom = true): Promise<BundleState> {
  const s = freshState(optionsOf(f));
  const cert = contentOf(f, /^certs\//);
  feed(s, signerCertEntry, cert.path, cert.content);
  if (withAibom) {
    await open(s, aibomId);
    feed(s, sigstoreEntry, Paths.sigstore(aibomId), contentOf(f, Paths.sigstore(aibomId)).content);
    for (const p of [Paths.aibom(runId), Paths.aibomManifest(runId), Paths.aibomMetadata(runId)]) {
      feed(s, aibomEntry, p, contentOf(f, p).content);
    }
  }
  return s;
}

async function viewsState(content: (name: string) => Buffer | undefined, withAibom = true) {
  const s = await stateWith(withAibom);
  for (const name of VIEWS) {
    await open(s, viewIds.get(name)!);
    const bytes = content(name);
    if (bytes !== undefined) feed(s, aibomViewEntry, viewPath(name), bytes);
  }
  s.closeRecord();
  return s;
}

const original = (name: string) => contentOf(f, viewPath(name)).content;
/** The view with one claim changed, re-serialized: still JSON, no longer what the record signs. */
const changed = (name: string) => {
  const doc = JSON.parse(original(name).toString('utf8')) as Record<string, unknown>;
  doc.changed = true;
  return Buffer.from(JSON.stringify(doc));
};

describe('runs/<run>/aibom.<view>.json', () => {
  it('the fixture bundle carries both view files, each right after its own record', () => {
    expect(viewIds.size).toBe(2);
    for (const name of VIEWS) {
      const at = f.entries.findIndex((e) => e.path === viewPath(name));
      expect(at).toBeGreaterThan(0);
      const before = f.entries.slice(0, at).findLast((e) => e.path.startsWith('attestations/'));
      expect(before?.path.startsWith(`attestations/${viewIds.get(name)!}/`)).toBe(true);
    }
  });

  it('after the AIBOM: both verify against it and its records', async () => {
    expect(viewProblems(await viewsState(original))).toEqual([]);
  });

  it('after the AIBOM: a changed view is named, the other one still verifies', async () => {
    const s = await viewsState((n) => (n === VIEWS[0] ? changed(n) : original(n)));
    // Not the digest the AIBOM's metadata lists for it, nor the bytes its record signs.
    expect(viewProblems(s)).toEqual([
      `${viewPath(VIEWS[0])} VIEW_DIGEST_MISMATCH`,
      `${viewPath(VIEWS[0])} VIEW_NOT_SIGNED`,
    ]);
  });

  it('a view record closed without its file: MISSING', async () => {
    const s = await viewsState((n) => (n === VIEWS[1] ? undefined : original(n)));
    expect(viewProblems(s)).toEqual([`${viewPath(VIEWS[1])} MISSING`]);
  });

  it('without the AIBOM in the bundle: the signed bytes verify, changed ones are VIEW_NOT_SIGNED', async () => {
    expect(viewProblems(await viewsState(original, false))).toEqual([]);
    const s = await viewsState(changed, false);
    expect(viewProblems(s)).toEqual(VIEWS.map((n) => `${viewPath(n)} VIEW_NOT_SIGNED`));
  });

  it('next to the AIBOM record, or next to the other view record: UNEXPECTED_ENTRY', async () => {
    const s = await stateWith();
    feed(s, aibomViewEntry, viewPath(VIEWS[0]), original(VIEWS[0]));
    await open(s, viewIds.get(VIEWS[1])!);
    feed(s, aibomViewEntry, viewPath(VIEWS[0]), original(VIEWS[0]));
    expect(viewProblems(s)).toEqual([
      `${viewPath(VIEWS[0])} UNEXPECTED_ENTRY`,
      `${viewPath(VIEWS[0])} UNEXPECTED_ENTRY`,
    ]);
  });
});

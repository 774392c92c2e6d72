import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { Paths } from '../../../src/export/layout.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { aibomEntry } from '../../../src/verify/entries/aibom.ts';
import { envelopeEntry } from '../../../src/verify/entries/envelope.ts';
import { signerCertEntry } from '../../../src/verify/entries/keys.ts';
import { sigstoreEntry } from '../../../src/verify/entries/sigstore.ts';
import type { BundleState } from '../../../src/verify/index.ts';
import { contentOf, feed, fixture, found, freshState, optionsOf, type Fixture } from './fixtures.ts';

/**
 * A record's entries alone: envelope.json (entries/envelope.ts: signer, signature, history,
 * capability chains), its sigstore.json (entries/sigstore.ts) and its run's AIBOM files
 * (entries/aibom.ts), each against hostile content.
 */
let f: Fixture;
let certPath: string;
let stepId: string;
let capabilityId: string;
let aibomId: string;
let runId: string;

beforeAll(async () => {
  f = await fixture();
  certPath = contentOf(f, /^certs\//).path;
  capabilityId = [...f.views.values()].find((v) => v.kind === 'capability')!.id;
  stepId = [...f.views.values()].find((v) => v.kind === 'step' && v.capability_tokens !== undefined)!.id;
  const aibom = [...f.views.values()].find((v) => v.kind === 'aibom')!;
  aibomId = aibom.id;
  runId = aibom.run_id!;
});

/** A state that has read the signer chain (as the bundle ships it before the records). */
function withChain(options = optionsOf(f)): BundleState {
  const s = freshState(options);
  feed(s, signerCertEntry, certPath, contentOf(f, certPath).content);
  return s;
}

const viewText = (id: string, edit: (v: Record<string, unknown>) => void = () => {}): string => {
  const v = structuredClone(f.views.get(id)) as unknown as Record<string, unknown>;
  edit(v);
  return JSON.stringify(v);
};

async function openRecord(s: BundleState, id: string, text = viewText(id)): Promise<void> {
  feed(s, envelopeEntry, Paths.envelope(id), text);
  await s.settle();
}

describe('envelope.json', () => {
  it('verifies a step record with its capability chain and opens it for the files after it', async () => {
    const s = withChain();
    await openRecord(s, stepId);
    expect(s.problems).toEqual([]);
    expect(s.open?.id).toBe(stepId);
    expect(s.chainLines).toHaveLength(1);
    expect(s.digests).toEqual([f.views.get(stepId)!.digest]);
    expect(s.attestations).toBe(1);
  });

  it('a record whose signer chain the bundle did not bring before it: UNTRUSTED_KEY, no chain line', async () => {
    const s = freshState(optionsOf(f));
    await openRecord(s, stepId);
    expect(found(s)).toEqual([`${Paths.envelope(stepId)} UNTRUSTED_KEY`]);
    expect(s.chainLines).toEqual([]);
  });

  it('a changed payload, another id, no signature metadata, a bare key not given as trusted', async () => {
    const s = withChain();
    await openRecord(
      s,
      capabilityId,
      viewText(capabilityId, (v) => {
        const env = v.envelope as { payload: string };
        env.payload = Buffer.from('{"_type":"x"}').toString('base64');
      }),
    );
    expect(found(s)).toContain(`${Paths.envelope(capabilityId)} SIGNATURE_INVALID`);
    expect(s.chainLines).toEqual([]);

    const t = withChain();
    await openRecord(t, capabilityId, viewText(stepId));
    expect(t.problems[0]).toMatchObject({ code: 'RECORD_MISMATCH', entry: Paths.envelope(capabilityId) });

    const u = withChain();
    await openRecord(
      u,
      stepId,
      viewText(stepId, (v) => (v.signature = null)),
    );
    expect(found(u)[0]).toBe(`${Paths.envelope(stepId)} MALFORMED`);

    const w = withChain();
    await openRecord(
      w,
      stepId,
      viewText(
        stepId,
        (v) => (v.signature = { key_id: `sha256:${'d'.repeat(64)}`, algorithm: 'ECDSA_P256_SHA256' }),
      ),
    );
    expect(found(w)[0]).toBe(`${Paths.envelope(stepId)} UNTRUSTED_KEY`);
  });

  it('not a JSON object: MALFORMED, still counted (the .intoto.jsonl line and the index count it)', async () => {
    for (const text of ['{', '[]', '"x"', 'null']) {
      const s = withChain();
      await openRecord(s, stepId, text);
      expect(found(s), text).toEqual([`${Paths.envelope(stepId)} MALFORMED`]);
      expect(s.attestations).toBe(1);
      expect(s.digests).toEqual(['']);
    }
  });

  it('a tampered token in a verified record: the capability problem, and no chain line for it', async () => {
    const s = withChain();
    await openRecord(
      s,
      stepId,
      viewText(stepId, (v) => {
        const tokens = v.capability_tokens as { format: string; token: string }[];
        const vc = tokens.find((t) => t.format === 'vc+jwt')!;
        vc.token = `${vc.token.slice(0, -4)}AAAA`;
      }),
    );
    expect(s.problems.map((p) => p.code)).toContain('TOKEN_SIGNATURE_INVALID');
    expect(s.chainLines).toEqual([]);
  });

  it('with the signer history: a signer the history does not hold is named', async () => {
    const s = withChain(optionsOf(f, { signerHistory: [] }));
    await openRecord(s, stepId);
    expect(s.problems.map((p) => p.code)).toEqual(['UNKNOWN_CERTIFICATE']);
  });
});

describe('sigstore.json', () => {
  const path = () => Paths.sigstore(stepId);

  it('the record before it: matches; missing when the record closes: MISSING', async () => {
    const s = withChain();
    await openRecord(s, stepId);
    feed(s, sigstoreEntry, path(), contentOf(f, path()).content);
    expect(s.problems).toEqual([]);
    s.closeRecord();
    expect(s.problems).toEqual([]);
    const t = withChain();
    await openRecord(t, stepId);
    t.closeRecord();
    expect(found(t)).toEqual([`${path()} MISSING`]);
  });

  it("not next to its record, not JSON, another record's bundle", async () => {
    const s = withChain();
    feed(s, sigstoreEntry, path(), contentOf(f, path()).content);
    expect(found(s)).toEqual([`${path()} UNEXPECTED_ENTRY`]);
    const t = withChain();
    await openRecord(t, stepId);
    feed(t, sigstoreEntry, path(), '{');
    expect(found(t)).toEqual([`${path()} MALFORMED`]);
    const u = withChain();
    await openRecord(u, stepId);
    feed(u, sigstoreEntry, path(), contentOf(f, Paths.sigstore(capabilityId)).content);
    expect(found(u).every((p) => p === `${path()} SIGSTORE_BUNDLE_MISMATCH`)).toBe(true);
    expect(u.problems.length).toBeGreaterThan(0);
  });

  it('a record without a trusted signer has nothing to compare with: UNTRUSTED_KEY', async () => {
    const s = freshState(optionsOf(f));
    await openRecord(s, stepId);
    feed(s, sigstoreEntry, path(), contentOf(f, path()).content);
    expect(found(s)).toEqual([`${Paths.envelope(stepId)} UNTRUSTED_KEY`, `${path()} UNTRUSTED_KEY`]);
  });
});

describe('runs/<run>/aibom.*', () => {
  const files = () => [Paths.aibom(runId), Paths.aibomManifest(runId), Paths.aibomMetadata(runId)];

  async function aibomState(content: (path: string) => Buffer | string, options = optionsOf(f)) {
    const s = withChain(options);
    await openRecord(s, aibomId);
    feed(s, sigstoreEntry, Paths.sigstore(aibomId), contentOf(f, Paths.sigstore(aibomId)).content);
    for (const p of files()) feed(s, aibomEntry, p, content(p));
    s.closeRecord();
    return s;
  }

  it('all three after their AIBOM record: verified when it closes, counted as a run', async () => {
    const s = await aibomState((p) => contentOf(f, p).content);
    // The record's statement and receipt are another handler's (not fed here).
    expect(found(s)).toEqual([`${Paths.statement(aibomId)} MISSING`, `${Paths.receipt(aibomId)} MISSING`]);
    expect(s.runs).toBe(1);
  });

  it('a blob that is not the attestation subject, metadata that is not JSON', async () => {
    const other = await aibomState((p) =>
      p === Paths.aibom(runId)
        ? Buffer.concat([contentOf(f, p).content, Buffer.from(' ')])
        : contentOf(f, p).content,
    );
    expect(found(other)).toContain(`${Paths.aibom(runId)} DIGEST_MISMATCH`);
    const meta = await aibomState((p) => (p === Paths.aibomMetadata(runId) ? '{' : contentOf(f, p).content));
    expect(found(meta).filter((p) => p.startsWith('runs/'))).toEqual([
      `${Paths.aibomMetadata(runId)} MALFORMED`,
    ]);
  });

  it('a file missing when the record closes; a file with no AIBOM record before it', async () => {
    const s = withChain();
    await openRecord(s, aibomId);
    feed(s, aibomEntry, Paths.aibom(runId), contentOf(f, Paths.aibom(runId)).content);
    s.closeRecord();
    expect(found(s).filter((p) => p.startsWith('runs/'))).toEqual([`${Paths.aibom(runId)} MISSING`]);
    const t = withChain();
    await openRecord(t, stepId);
    feed(t, aibomEntry, Paths.aibom(runId), contentOf(f, Paths.aibom(runId)).content);
    expect(found(t)).toEqual([`${Paths.aibom(runId)} UNEXPECTED_ENTRY`]);
  });

  it('under another CA the manifest fails (the record too)', async () => {
    const other = signerFromPem(await generateDevPki());
    const s = await aibomState(
      (p) => contentOf(f, p).content,
      optionsOf(f, { trustAnchors: other.caCertificates }),
    );
    expect(found(s).some((p) => p.startsWith(Paths.aibomManifest(runId)))).toBe(true);
  });
});

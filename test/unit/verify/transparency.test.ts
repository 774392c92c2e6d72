import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { Paths } from '../../../src/export/layout.ts';
import { logKeyOf } from '../../../src/cose/key.ts';
import { envelopeEntry } from '../../../src/verify/entries/envelope.ts';
import { signerCertEntry } from '../../../src/verify/entries/keys.ts';
import { sigstoreEntry } from '../../../src/verify/entries/sigstore.ts';
import { receiptEntry, statementEntry } from '../../../src/verify/entries/transparency.ts';
import { verifyBundle, type BundleState } from '../../../src/verify/index.ts';
import { logSigner } from '../transparency/fixtures.ts';
import { contentOf, feed, fixture, found, freshState, optionsOf, type Fixture } from './fixtures.ts';

/**
 * statement.cose and receipt.cose alone (entries/transparency.ts): the statement is the record's,
 * the receipt proves it under a trusted log key, and a published record has both.
 */
let f: Fixture;
let published: string;
let unpublished: string;

beforeAll(async () => {
  f = await fixture();
  published = [...f.views.values()].find((v) => v.kind === 'policy')!.id;
  unpublished = [...f.views.values()].find((v) => v.kind === 'step')!.id;
});

async function opened(id: string, options = optionsOf(f, { logKeys: [f.logKey] })): Promise<BundleState> {
  const s = freshState(options);
  const cert = contentOf(f, /^certs\//);
  feed(s, signerCertEntry, cert.path, cert.content);
  feed(s, envelopeEntry, Paths.envelope(id), contentOf(f, Paths.envelope(id)).content);
  await s.settle();
  feed(s, sigstoreEntry, Paths.sigstore(id), contentOf(f, Paths.sigstore(id)).content);
  return s;
}

const statementOf = (id: string) => contentOf(f, Paths.statement(id)).content;
const receiptOf = (id: string) => contentOf(f, Paths.receipt(id)).content;

describe('statement.cose and receipt.cose', () => {
  it("the published record's statement and receipt verify; counted as a receipt", async () => {
    const s = await opened(published);
    feed(s, statementEntry, Paths.statement(published), statementOf(published));
    feed(s, receiptEntry, Paths.receipt(published), receiptOf(published));
    s.closeRecord();
    expect(s.problems).toEqual([]);
    expect(s.receipts).toBe(1);
  });

  it('missing when the record closes', async () => {
    const s = await opened(published);
    s.closeRecord();
    expect(found(s)).toEqual([
      `${Paths.statement(published)} MISSING`,
      `${Paths.receipt(published)} MISSING`,
    ]);
  });

  it('for a record that is not published, or not next to its record: UNEXPECTED_ENTRY', async () => {
    const s = await opened(unpublished);
    feed(s, statementEntry, Paths.statement(unpublished), statementOf(published));
    feed(s, receiptEntry, Paths.receipt(published), receiptOf(published));
    expect(found(s)).toEqual([
      `${Paths.statement(unpublished)} UNEXPECTED_ENTRY`,
      `${Paths.receipt(published)} UNEXPECTED_ENTRY`,
    ]);
  });

  it("another record's statement and receipt: mismatches named, the receipt does not prove this statement", async () => {
    const other = [...f.views.values()].find((v) => v.kind === 'aibom')!.id;
    const s = await opened(published);
    feed(s, statementEntry, Paths.statement(published), statementOf(other));
    feed(s, receiptEntry, Paths.receipt(published), receiptOf(other));
    const codes = found(s);
    expect(codes).toContain(`${Paths.statement(published)} RECORD_MISMATCH`);
    expect(codes).toContain(`${Paths.statement(published)} STATEMENT_MISMATCH`);
    expect(codes).toContain(`${Paths.receipt(published)} RECORD_MISMATCH`);
  });

  it('no trusted log key: UNKNOWN_LOG_KEY; a log key that did not sign it: the receipt fails', async () => {
    const none = await opened(published, optionsOf(f));
    feed(none, receiptEntry, Paths.receipt(published), receiptOf(published));
    expect(found(none)).toEqual([`${Paths.receipt(published)} UNKNOWN_LOG_KEY`]);
    const wrong = await opened(published, optionsOf(f, { logKeys: [logKeyOf(logSigner().publicKey)] }));
    feed(wrong, receiptEntry, Paths.receipt(published), receiptOf(published));
    expect(found(wrong)).toEqual([`${Paths.receipt(published)} UNKNOWN_LOG_KEY`]);
  });

  it("a statement that is not COSE: reported with the parser's code against the entry", async () => {
    const s = await opened(published);
    feed(s, statementEntry, Paths.statement(published), Buffer.from('not cose'));
    expect(found(s)).toContain(`${Paths.statement(published)} RECORD_MISMATCH`);
    expect(s.problems.length).toBe(2);
  });
});

describe('a bundle whose records claim a remote SCITT publication', () => {
  it("with receipts of the exporting deployment's own log (scitt/log-keys.cbor): RECEIPT_NOT_REMOTE on each", async () => {
    const lying = await fixture({ claim: { backend: 'scrapi', mode: 'published' } });
    const result = await verifyBundle(Readable.from([lying.bytes]), optionsOf(lying));
    const receipts = lying.items.filter((i) => i.scitt !== undefined).map((i) => Paths.receipt(i.id));
    expect(receipts.length).toBeGreaterThan(0);
    expect(result.problems.map((p) => `${p.entry} ${p.code}`)).toEqual(
      receipts.map((r) => `${r} RECEIPT_NOT_REMOTE`),
    );
    expect(result.ok).toBe(false);
  });

  it('with receipts of another log, given with --log-keys: verified', async () => {
    const remote = logSigner();
    const honest = await fixture({ claim: { backend: 'scrapi', mode: 'published' }, log: remote });
    const result = await verifyBundle(
      Readable.from([honest.bytes]),
      optionsOf(honest, { logKeys: [logKeyOf(remote.publicKey)] }),
    );
    expect(result.problems).toEqual([]);
  });

  it("the trust bundle's own log keys count too (a bundle that ships none)", async () => {
    const remote = logSigner();
    const g = await fixture({ claim: { backend: 'scrapi', mode: 'published' }, log: remote });
    const result = await verifyBundle(
      Readable.from([g.bytes]),
      optionsOf(g, { logKeys: [logKeyOf(remote.publicKey)], localLogKeys: [logKeyOf(remote.publicKey)] }),
    );
    expect(result.problems.map((p) => p.code)).toContain('RECEIPT_NOT_REMOTE');
  });
});

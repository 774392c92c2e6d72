import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { encodeKeySet, logKeyOf } from '../../../src/cose/key.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { certificateRef } from '../../../src/signing/index.ts';
import {
  bareKeyEntry,
  logCertEntry,
  logKeysEntry,
  signerCertEntry,
} from '../../../src/verify/entries/keys.ts';
import { feed, fixture, found, freshState, optionsOf, type Fixture } from './fixtures.ts';

/**
 * The key entries alone (entries/keys.ts): nothing the bundle carries is trusted because it is
 * there; a chain is used only when it leads to the caller's anchors and its file is named by its
 * own leaf.
 */
let f: Fixture;
let foreign: KeySigner;
let chainPem: string;
let refHex: string;
let kidHex: string;
const pemOf = (s: KeySigner) => s.certificateChain!.map((c) => c.toString()).join('');

beforeAll(async () => {
  f = await fixture();
  foreign = signerFromPem(await generateDevPki());
  chainPem = pemOf(f.signer);
  refHex = certificateRef(f.signer.certificateChain![0]!).slice(7);
  kidHex = f.logKey.kid.toString('hex');
});

describe('scitt/log-keys.cbor', () => {
  it('declares the exporting deployment its log keys; garbage is MALFORMED', () => {
    const s = freshState(optionsOf(f));
    feed(s, logKeysEntry, 'scitt/log-keys.cbor', encodeKeySet([f.logKey]));
    expect(s.bundleLogKeys.map((k) => k.kid.toString('hex'))).toEqual([kidHex]);
    expect(s.logKeys).toEqual([]); // declared, not trusted
    const bad = freshState(optionsOf(f));
    feed(bad, logKeysEntry, 'scitt/log-keys.cbor', Buffer.from([0xff, 0x00, 0x13]));
    expect(found(bad)).toEqual(['scitt/log-keys.cbor MALFORMED']);
    expect(bad.bundleLogKeys).toEqual([]);
  });
});

describe('scitt/log-certs/<kid>.pem', () => {
  it('trusts a declared log key whose chain leads to the anchors', () => {
    const s = freshState(optionsOf(f));
    feed(s, logKeysEntry, 'scitt/log-keys.cbor', encodeKeySet([f.logKey]));
    feed(s, logCertEntry, `scitt/log-certs/${kidHex}.pem`, chainPem);
    expect(s.problems).toEqual([]);
    expect(s.logKeys.map((k) => k.kid.toString('hex'))).toEqual([kidHex]);
  });

  it('refuses a chain from another CA, a key the key set does not declare, a file named for another key', () => {
    const otherKid = logKeyOf(foreign.publicKey).kid.toString('hex');
    const s = freshState(optionsOf(f));
    feed(s, logKeysEntry, 'scitt/log-keys.cbor', encodeKeySet([f.logKey, logKeyOf(foreign.publicKey)]));
    feed(s, logCertEntry, `scitt/log-certs/${otherKid}.pem`, pemOf(foreign));
    expect(found(s)).toEqual([`scitt/log-certs/${otherKid}.pem UNTRUSTED_KEY`]);
    expect(s.logKeys).toEqual([]);

    const undeclared = freshState(optionsOf(f));
    feed(undeclared, logCertEntry, `scitt/log-certs/${kidHex}.pem`, chainPem);
    expect(found(undeclared)).toEqual([`scitt/log-certs/${kidHex}.pem RECORD_MISMATCH`]);
    expect(undeclared.logKeys).toEqual([]);

    const misnamed = freshState(optionsOf(f));
    feed(misnamed, logKeysEntry, 'scitt/log-keys.cbor', encodeKeySet([f.logKey]));
    feed(misnamed, logCertEntry, `scitt/log-certs/${'a'.repeat(64)}.pem`, chainPem);
    expect(found(misnamed)).toEqual([
      `scitt/log-certs/${'a'.repeat(64)}.pem RECORD_MISMATCH`,
      `scitt/log-certs/${'a'.repeat(64)}.pem RECORD_MISMATCH`,
    ]);
  });

  it('not a PEM chain: MALFORMED', () => {
    const s = freshState(optionsOf(f));
    feed(s, logCertEntry, `scitt/log-certs/${kidHex}.pem`, 'not a certificate');
    expect(found(s)[0]).toBe(`scitt/log-certs/${kidHex}.pem MALFORMED`);
  });
});

describe('certs/<ref>.pem', () => {
  it('keeps a signer chain leading to the anchors, by its cert_chain_ref', () => {
    const s = freshState(optionsOf(f));
    feed(s, signerCertEntry, `certs/${refHex}.pem`, chainPem);
    expect(s.problems).toEqual([]);
    expect(s.signerChains.get(refHex)?.[0]?.fingerprint256).toBe(
      f.signer.certificateChain![0]!.fingerprint256,
    );
  });

  it('keeps an expired signer chain (records are judged at their own time), refuses a foreign one', () => {
    const later = freshState(optionsOf(f, { at: new Date('2200-01-01T00:00:00Z') }));
    feed(later, signerCertEntry, `certs/${refHex}.pem`, chainPem);
    expect(later.problems).toEqual([]);
    expect(later.signerChains.has(refHex)).toBe(true);

    const foreignRef = certificateRef(foreign.certificateChain![0]!).slice(7);
    const s = freshState(optionsOf(f));
    feed(s, signerCertEntry, `certs/${foreignRef}.pem`, pemOf(foreign));
    expect(found(s)).toEqual([`certs/${foreignRef}.pem UNTRUSTED_KEY`]);
    expect(s.signerChains.size).toBe(0);
  });

  it('a file named for another certificate: RECORD_MISMATCH naming the leaf it holds', () => {
    const s = freshState(optionsOf(f));
    feed(s, signerCertEntry, `certs/${'b'.repeat(64)}.pem`, chainPem);
    expect(s.problems).toEqual([
      {
        entry: `certs/${'b'.repeat(64)}.pem`,
        code: 'RECORD_MISMATCH',
        message: `the leaf does not match the file name (${refHex})`,
      },
    ]);
  });
});

describe('keys/<id>.pem', () => {
  it('is informational: a bare key in the bundle is never trusted', () => {
    const s = freshState(optionsOf(f));
    feed(s, bareKeyEntry, `keys/${'c'.repeat(64)}.pem`, 'anything');
    expect(s.problems).toEqual([]);
    expect(s.trustedKeys.size).toBe(0);
  });
});

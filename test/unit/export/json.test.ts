import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { dsseJson, intotoLine, jsonString, viewJson } from '../../../src/export/json.ts';
import { sigstoreBundle, sigstoreBundleJson } from '../../../src/export/sigstore.ts';
import { toApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import type { DsseEnvelope, StoredAttestation } from '../../../src/vault/index.ts';
import { runRecords, storedRecord } from '../../helpers/records.ts';

/**
 * The export's DSSE JSON texts (src/export/json.ts, sigstoreBundleJson) are built from parts shared
 * between entries; each must be byte for byte what JSON.stringify of its object gives, for the
 * records the vault stores and for shapes it does not (where they fall back to JSON.stringify).
 */

let signer: KeySigner;
let records: StoredAttestation[];

beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
  const made = runRecords(signer, 'team-a', { runId: randomUUID() }).records;
  records = made.flatMap((r, i) => [
    storedRecord(r, 2 * i + 1),
    // With a time-stamp, chains and tokens: every optional member of the API view.
    storedRecord(r, 2 * i + 2, {
      timestamp: {
        genTime: new Date(Date.UTC(2026, 1, 1, 0, 0, 0, 123)),
        tsa: 'CN=tsa, O="quoted" ✓',
        serial: '0a1b',
        response: Buffer.from([1, 2, 3, 250]),
      },
      c2paManifestRef: `sha256:${'2'.repeat(64)}`,
      capabilityChains: [{ root: null, links: [{ scope: 'a"b\\c\u0001', granted_by: 'é' }] }],
      capabilityTokens: [{ format: 'vc+jwt', id: 'tok-1', token: 'eyJ.eyJ.sig' }],
    }),
  ]);
});

const base: DsseEnvelope = {
  payload: Buffer.from('{"a":1}').toString('base64'),
  payloadType: 'application/vnd.in-toto+json',
  signatures: [{ keyid: 'sha256:abc', sig: 'MEUCIQ+/==' }],
};

/** Envelopes as a tampered or foreign row could hold them. */
const odd: unknown[] = [
  base,
  { ...base, signatures: [] },
  { ...base, signatures: [base.signatures[0], { keyid: 'k2', sig: 's2' }] },
  { ...base, payloadType: 'text/"quoted"\\back\nslash\u0001\u007f' },
  { ...base, payload: 'non-base64 é ✓ 😀 \ud800 lone' },
  { ...base, signatures: [{ keyid: 'ключ', sig: 'x', extra: 1 }] },
  { ...base, signatures: [{ sig: 'no keyid' }] },
  { ...base, signatures: [null] },
  { ...base, signatures: 'not a list' },
  { ...base, payloadType: 42 },
  { ...base, payload: null },
  { payload: base.payload, signatures: base.signatures },
  { ...base, extra: 'not written' },
];

const envelopeObject = (e: DsseEnvelope) => ({
  payload: e.payload,
  payloadType: e.payloadType,
  signatures: e.signatures.map((s) => ({ keyid: s.keyid, sig: s.sig })),
});

describe('export JSON texts', () => {
  it('jsonString is JSON.stringify of a string', () => {
    for (const s of ['', 'plain', 'a"b', 'a\\b', '\u0000\u001f\u007f', 'é✓😀', '\ud800', 'x'.repeat(5000)]) {
      expect(jsonString(s)).toBe(JSON.stringify(s));
    }
  });

  it('the .intoto.jsonl line is the JSON of the envelope (payload, payloadType, keyid and sig)', () => {
    const envelopes = [
      ...(odd as DsseEnvelope[]).filter(
        (e) => Array.isArray(e.signatures) && e.signatures.every((s) => s !== null),
      ),
      ...records.map((r) => r.envelope),
    ];
    for (const e of envelopes) {
      expect(intotoLine(e), JSON.stringify(e)).toBe(`${JSON.stringify(envelopeObject(e))}\n`);
      const dsse = dsseJson(e);
      if (dsse !== null) {
        expect(dsse.payload).toBe(JSON.stringify(e.payload));
        expect(dsse.payloadType).toBe(JSON.stringify(e.payloadType));
        expect(dsse.envelope).toBe(JSON.stringify(envelopeObject(e)));
      }
    }
    for (const r of records) expect(dsseJson(r.envelope)).not.toBeNull();
  });

  it('the Sigstore bundle is JSON.stringify of sigstoreBundle', () => {
    const times = [
      [],
      [{ signedTimestamp: 'MIIB/+==' }],
      [{ signedTimestamp: 'a' }, { signedTimestamp: 'b"c' }],
    ];
    const envelopes = [
      ...(odd as DsseEnvelope[]).filter(
        (e) => Array.isArray(e.signatures) && e.signatures.every((s) => s !== null),
      ),
      ...records.map((r) => r.envelope),
    ];
    for (const e of envelopes) {
      for (const t of times) {
        for (const keyId of ['sha256:abc', 'kéy "q"', undefined as unknown as string]) {
          const expected = JSON.stringify(sigstoreBundle(e, { keyId }, t));
          expect(sigstoreBundleJson(e, { keyId }, t), JSON.stringify([e, keyId, t])).toBe(expected);
          expect(sigstoreBundleJson(e, { keyId }, t, dsseJson(e))).toBe(expected);
        }
      }
    }
  });

  it('envelope.json is JSON.stringify of the API view, for every record kind and optional member', () => {
    for (const r of records) {
      for (const transparency of [null, { state: 'published', entry_id: 'e"1', receipt: 'AAE=' }]) {
        const view = toApiEnvelope(r, transparency);
        const dsse = dsseJson(r.envelope)!;
        expect(viewJson(view, r.envelope, dsse), r.id).toBe(JSON.stringify(view));
        // The shared text is what is used (not a fallback to JSON.stringify).
        expect(viewJson(view, r.envelope, { ...dsse, envelope: '"MARK"' })).toBe(
          JSON.stringify(view).replace(dsse.envelope, '"MARK"'),
        );
      }
    }
  });

  it('envelope.json is JSON.stringify of any view, whatever its envelope member holds', () => {
    const r = records[0]!;
    const e = r.envelope;
    const dsse = dsseJson(e);
    const view = toApiEnvelope(r) as unknown as Record<string, unknown>;
    const sig = e.signatures[0]!;
    const inherited = Object.create({ envelope: envelopeObject(e) }) as object;
    const sparse: unknown[] = [];
    sparse.length = e.signatures.length;
    // [view, whether the envelope's shared text is used]: elsewhere, JSON.stringify writes it.
    const variants: [unknown, boolean][] = [
      [view, true],
      [{ ...view, envelope: { ...envelopeObject(e) } }, true],
      [{ envelope: envelopeObject(e) }, true],
      [{ envelope: envelopeObject(e), after: undefined, fn: () => 1, last: 'x' }, true],
      [{ envelope: envelopeObject(e), 'quoted "key"': 1, é: [undefined, () => 1] }, true],
      // Members JSON.stringify leaves out.
      [{ ...view, skipped: undefined, fn: () => 1, sym: Symbol('s') }, true],
      // Not the stored envelope as the view builder copies it.
      [{ ...view, envelope: { ...envelopeObject(e), extra: 1 } }, false],
      [
        { ...view, envelope: { payloadType: e.payloadType, payload: e.payload, signatures: e.signatures } },
        false,
      ],
      [{ ...view, envelope: { ...envelopeObject(e), payload: `${e.payload}x` } }, false],
      [{ ...view, envelope: { ...envelopeObject(e), signatures: [] } }, false],
      [{ ...view, envelope: { ...envelopeObject(e), signatures: sparse } }, false],
      [
        { ...view, envelope: { ...envelopeObject(e), signatures: [{ sig: sig.sig, keyid: sig.keyid }] } },
        false,
      ],
      [{ ...view, envelope: { ...envelopeObject(e), signatures: [{ ...sig, extra: true }] } }, false],
      [{ ...view, envelope: { ...envelopeObject(e), signatures: {} } }, false],
      [{ ...view, envelope: { ...envelopeObject(e), toJSON: () => 'own' } }, false],
      [
        {
          ...view,
          envelope: Object.assign(Object.create({ toJSON: () => 'inherited' }) as object, envelopeObject(e)),
        },
        false,
      ],
      [{ ...view, envelope: null }, false],
      [{ ...view, envelope: undefined }, false],
      [{ ...view, envelope: [e.payload] }, false],
      // toJSON is called with the member's name (a Date ignores it, the other does not).
      [
        { envelope: envelopeObject(e), when: new Date(0), nested: { toJSON: (key: string) => `key:${key}` } },
        false,
      ],
      [{ ...view, toJSON: () => 'whole' }, false],
      [inherited, false],
      [{}, false],
      [[1, 2], false],
    ];
    for (const [v, shared] of variants) {
      const expected = JSON.stringify(v);
      expect(viewJson(v as object, e, dsse), expected).toBe(expected);
      expect(viewJson(v as object, e, null)).toBe(expected);
      // With a marked shared text: found where it was used, and only there.
      const marked = viewJson(v as object, e, { ...dsse!, envelope: '"MARK"' });
      expect(marked !== expected, expected).toBe(shared);
      if (shared) expect(marked).toBe(expected.replace(dsse!.envelope, '"MARK"'));
    }
  });
});

import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { logKeyOf } from '../../../src/cose/key.ts';
import { writeBundle, type ExportItem } from '../../../src/export/bundle.ts';
import { Paths } from '../../../src/export/layout.ts';
import { sigstoreBundle, sigstoreBundleProblems } from '../../../src/export/sigstore.ts';
import { verifyBundle } from '../../../src/export/verify.ts';
import { toApiEnvelope } from '../../../src/http/views/envelope.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';
import { tarEntries } from '../../helpers/export.ts';
import { runRecords, storedRecord } from '../../helpers/records.ts';

/**
 * The RFC 3161 time-stamp of a record in its export: the record's `signature.timestamp` goes into
 * its Sigstore bundle's `verificationMaterial.timestampVerificationData.rfc3161Timestamps`, and the
 * verifier refuses a Sigstore bundle that drops or swaps it. (Real tokens, checked by cosign and
 * against the TSA's root, are in test/integration/timestamp.) The bytes stand in for a token here:
 * without TSA anchors the verifier does not open it; with them, it is refused with a code.
 */
let signer: KeySigner;
/** Stands in for a DER TimeStampResp. */
const TOKEN = Buffer.from('a time-stamp token over the first signature');

function items(options: { omitFromBundle?: boolean } = {}): ExportItem[] {
  const records = runRecords(signer, 'team-a', { runId: randomUUID() }).records;
  const chain = signer.certificateChain!;
  return records.map((r, i) => {
    // The first record is time-stamped; the others not yet.
    const stamped = i === 0;
    const s = storedRecord(
      r,
      i + 1,
      stamped
        ? {
            timestamp: {
              genTime: new Date(Date.UTC(2026, 0, 1)),
              tsa: 'CN=tsa',
              serial: '01',
              response: TOKEN,
            },
          }
        : {},
    );
    return {
      id: s.id,
      createdAt: s.createdAt,
      namespace: s.namespace,
      envelope: s.envelope,
      view: toApiEnvelope(s),
      signer: {
        ref: s.signature.cert_chain_ref!,
        keyId: s.signature.key_id,
        pem: chain.map((c) => c.toString()).join(''),
        certificate: chain[0]!,
      },
      ...(stamped && options.omitFromBundle !== true
        ? { timestamp: { signedTimestamp: TOKEN.toString('base64') } }
        : {}),
    };
  });
}

async function bundleOf(list: ExportItem[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of writeBundle({
    segments: Readable.from([{ items: list, scittEnqueued: [] }]),
    logKeys: [{ key: logKeyOf(signer.publicKey) }],
    service: { name: 'aibom-vault', version: 'test' },
    selection: { namespaces: ['team-a'] },
    signer: signer.deterministic(),
    claimGenerator: 'aibom-vault/0.1.0',
  })) {
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

beforeAll(async () => {
  signer = signerFromPem(await generateDevPki());
});

describe('Sigstore bundles carry the record time-stamp', () => {
  it("in rfc3161Timestamps when the record has one, and the verifier compares it with the record's", async () => {
    const list = items();
    const bytes = await bundleOf(list);
    const entries = await tarEntries(bytes);
    const sigstore = (id: string) =>
      JSON.parse(entries.find((e) => e.path === Paths.sigstore(id))!.content.toString()) as {
        verificationMaterial: { timestampVerificationData: { rfc3161Timestamps: unknown[] } };
      };
    expect(sigstore(list[0]!.id).verificationMaterial.timestampVerificationData.rfc3161Timestamps).toEqual([
      { signedTimestamp: TOKEN.toString('base64') },
    ]);
    expect(sigstore(list[1]!.id).verificationMaterial.timestampVerificationData.rfc3161Timestamps).toEqual(
      [],
    );
    const result = await verifyBundle(Readable.from([bytes]), { trustAnchors: signer.caCertificates });
    expect(result.problems).toEqual([]);
    // Not opened without TSA anchors: nobody's certificate was judged at its time.
    expect(result.timestamped).toBe(0);
  });

  it('a Sigstore bundle without the time-stamp its record carries is SIGSTORE_BUNDLE_MISMATCH', async () => {
    const list = items({ omitFromBundle: true });
    const result = await verifyBundle(Readable.from([await bundleOf(list)]), {
      trustAnchors: signer.caCertificates,
    });
    expect(result.problems).toEqual([
      {
        entry: Paths.sigstore(list[0]!.id),
        code: 'SIGSTORE_BUNDLE_MISMATCH',
        message: "timestampVerificationData does not carry the record's RFC 3161 time-stamp",
      },
    ]);
    // And one that carries another token than the record's.
    const envelope = list[0]!.envelope;
    const material = { keyId: signer.keyId };
    const other = sigstoreBundle(envelope, material, [{ signedTimestamp: 'b3RoZXI=' }]);
    expect(
      sigstoreBundleProblems(other, envelope, material, [{ signedTimestamp: TOKEN.toString('base64') }]),
    ).toEqual(["timestampVerificationData does not carry the record's RFC 3161 time-stamp"]);
  });

  it('with TSA anchors the token is opened: one that is no time-stamp is refused with its code', async () => {
    const list = items();
    const result = await verifyBundle(Readable.from([await bundleOf(list)]), {
      trustAnchors: signer.caCertificates,
      tsaTrustAnchors: signer.caCertificates,
    });
    // Named on the record; its capability chain (this first record is the capability) is then
    // not trusted either.
    expect(result.problems.map((p) => [p.entry, p.code])).toEqual([
      [Paths.envelope(list[0]!.id), 'TIMESTAMP_MALFORMED_TIMESTAMP'],
      [Paths.envelope(list[0]!.id), 'ENVELOPE_UNVERIFIED'],
    ]);
  });
});

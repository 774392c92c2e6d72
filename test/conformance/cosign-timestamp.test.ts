import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactStatement, sealStatement, type DsseEnvelope } from '../../src/attest/index.ts';
import { signerFromPem, type KeySigner } from '../../src/signing/index.ts';
import {
  createTsaClient,
  timestampDsseSignature,
  tsaTrustedRoot,
  verifyDsseSignatureTimestamp,
  type Rfc3161SignedTimestamp,
  type Timestamper,
  type VerifiedTimestamp,
} from '../../src/timestamp/index.ts';
import { generateDevPki, type DevPki } from '../helpers/pki.ts';
import { stack } from '../helpers/stack.ts';

/**
 * The RFC 3161 time-stamp of a DSSE signature, in the place a Sigstore bundle v0.3 carries it
 * (`verificationMaterial.timestampVerificationData.rfc3161Timestamps[].signedTimestamp`), checked
 * by an independent verifier: cosign (sigstore-go underneath), offline, with a trusted root naming
 * the stack's TSA. The bundle here is assembled by the test; the export path builds the real ones.
 */
const run = promisify(execFile);
let dir: string;
let tsa: Timestamper;
let tsaCa: X509Certificate;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cosign-tsa-'));
  tsaCa = new X509Certificate(await readFile(stack().env.TSA_TRUST_ANCHORS!));
  tsa = createTsaClient({ url: stack().env.TSA_URL!, trustAnchors: [tsaCa], deadlineMs: 20_000 });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const BLOB = Buffer.from('{"bom_format":"CycloneDX"}');

function envelopeFor(signer: KeySigner): { envelope: DsseEnvelope; type: string } {
  const statement = artifactStatement({
    runId: '0190a5c8-1234-7abc-8def-0123456789ab',
    name: 'aibom',
    mediaType: 'application/json',
    sha256: createHash('sha256').update(BLOB).digest('hex'),
    size: BLOB.length,
    bucket: 'aibom-vault',
    key: 'runs/r/aibom.json',
  });
  return { envelope: sealStatement(statement, signer).envelope, type: statement.predicateType };
}

/** A bundle v0.3; the DSSE signature carries no keyid (cosign 3.1.3 rejects ours: NOTES.md). */
function bundle(
  envelope: DsseEnvelope,
  material: Record<string, unknown>,
  timestamps: Rfc3161SignedTimestamp[],
): unknown {
  return {
    mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json',
    verificationMaterial: {
      ...material,
      tlogEntries: [],
      timestampVerificationData: { rfc3161Timestamps: timestamps },
    },
    dsseEnvelope: {
      payload: envelope.payload,
      payloadType: envelope.payloadType,
      signatures: envelope.signatures.map((s) => ({ sig: s.sig })),
    },
  };
}

/** A trusted root naming the stack's TSA (its chain, as the token carries it) and a CA. */
function trustedRoot(tsaLeaf: X509Certificate, ca: X509Certificate): unknown {
  const chain = (certs: X509Certificate[]) => ({
    certificates: certs.map((c) => ({ rawBytes: c.raw.toString('base64') })),
  });
  return {
    mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
    tlogs: [],
    ctlogs: [],
    certificateAuthorities: [
      {
        subject: { organization: 'aibom-vault dev', commonName: 'aibom-vault dev CA' },
        uri: 'https://aibom-vault.dev/ca',
        certChain: chain([ca]),
        validFor: { start: '2020-01-01T00:00:00Z' },
      },
    ],
    timestampAuthorities: [
      {
        subject: { organization: 'aibom-vault dev', commonName: 'aibom-vault dev time-stamping authority' },
        uri: stack().env.TSA_URL,
        certChain: chain([tsaLeaf, tsaCa]),
        validFor: { start: '2020-01-01T00:00:00Z' },
      },
    ],
  };
}

async function cosign(name: string, b: unknown, root: unknown, type: string, args: string[]) {
  const bundleFile = join(dir, `${name}.sigstore.json`);
  const rootFile = join(dir, `${name}.trusted_root.json`);
  const blobFile = join(dir, 'blob');
  await writeFile(bundleFile, JSON.stringify(b));
  await writeFile(rootFile, JSON.stringify(root));
  await writeFile(blobFile, BLOB);
  return run(
    stack().tools.cosign,
    [
      'verify-blob-attestation',
      '--bundle',
      bundleFile,
      '--trusted-root',
      rootFile,
      '--type',
      type,
      '--insecure-ignore-tlog=true',
      '--check-claims=false',
      ...args,
      blobFile,
    ],
    { env: { ...process.env, TUF_ROOT: join(dir, 'tuf') } },
  ).then(
    (r) => ({ ok: true, out: r.stdout + r.stderr }),
    (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

describe('cosign verifies the RFC 3161 time-stamp of a DSSE signature in a Sigstore bundle', () => {
  it('with a key: the time-stamp over the signature passes --use-signed-timestamps; one over other bytes fails', async () => {
    const signer = signerFromPem(await generateDevPki());
    const { envelope, type } = envelopeFor(signer);
    const { entry, timestamp } = await timestampDsseSignature(envelope, tsa);
    expect(verifyDsseSignatureTimestamp(envelope, entry, [tsaCa]).genTime).toEqual(timestamp.genTime);
    const key = join(dir, 'signer.pub');
    await writeFile(key, signer.publicKey.export({ type: 'spki', format: 'pem' }));
    // The trusted root `service-ctl keys fetch` writes: the TSA's root certificate alone.
    const root = tsaTrustedRoot([tsaCa]);
    const args = ['--key', key, '--use-signed-timestamps'];
    const material = { publicKey: { hint: 'aibom-vault' } };

    const good = await cosign('key-good', bundle(envelope, material, [entry]), root, type, args);
    expect(good.out).toContain('Verified OK');
    expect(good.ok).toBe(true);

    const other: VerifiedTimestamp = await tsa.timestamp(Buffer.from('another signature'));
    const wrong = await cosign(
      'key-wrong',
      bundle(envelope, material, [{ signedTimestamp: other.response.toString('base64') }]),
      root,
      type,
      args,
    );
    expect(wrong.ok).toBe(false);
    expect(wrong.out).toContain("hashed messages don't match");

    const none = await cosign('key-none', bundle(envelope, material, []), root, type, args);
    expect(none.ok).toBe(false);
  });

  it('with a certificate that has expired since: verified only thanks to the time-stamp', async () => {
    // A leaf valid for a few seconds, with what Sigstore verifiers want of a bundle certificate
    // (a SAN, the codeSigning EKU). It signs and is time-stamped now, and has expired when cosign runs.
    const pki: DevPki = await generateDevPki({
      leafUri: 'https://aibom-vault.dev/signer',
      extraLeafEkus: ['1.3.6.1.5.5.7.3.3'],
      notBefore: new Date(Date.now() - 60_000),
      notAfter: new Date(Date.now() + 3_000),
    });
    const signer = signerFromPem({ 'tls.crt': pki['tls.crt'], 'tls.key': pki['tls.key'] });
    const leaf = signer.certificateChain![0]!;
    const { envelope, type } = envelopeFor(signer);
    const { entry, timestamp } = await timestampDsseSignature(envelope, tsa);
    while (Date.now() <= leaf.validToDate.getTime() + 1_000) await new Promise((r) => setTimeout(r, 200));

    const b = bundle(envelope, { certificate: { rawBytes: leaf.raw.toString('base64') } }, [entry]);
    const root = trustedRoot(timestamp.tsaCertificate, new X509Certificate(pki['ca.crt']));
    const identity = [
      '--certificate-identity',
      'https://aibom-vault.dev/signer',
      '--certificate-oidc-issuer-regexp',
      '.*',
      '--insecure-ignore-sct',
    ];
    const withTimestamp = await cosign('cert', b, root, type, [...identity, '--use-signed-timestamps']);
    expect(withTimestamp.out).toContain('Verified OK');
    expect(withTimestamp.ok).toBe(true);
    const withoutTimestamp = await cosign('cert-no-ts', b, root, type, identity);
    expect(withoutTimestamp.ok).toBe(false);
  });
});

/**
 * The AIBOM's runtime signature time-stamp follows the records' rule (docs/timestamps.md): without
 * a TSA trust anchor it is not checked and the certificates are judged now, so the documented
 * `service-ctl verify … --trust-anchor trust/ca.pem` passes in a shell without TSA_TRUST_ANCHORS;
 * with an anchor that is not the TSA's it still fails (TIMESTAMP_UNTRUSTED_TSA), and with the
 * TSA's it is judged at its time. Real time-stamps from the stack's TSA.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { repoRoot } from '../../../hack/stack/stack.ts';
import { aibomDigest } from '../../../src/aibom/serialize.ts';
import { verifyAibomArtifact } from '../../../src/aibom/verify.ts';
import { buildManifest } from '../../../src/c2pa/index.ts';
import { signatureMetadata } from '../../../src/signing/index.ts';
import { createTsaClient } from '../../../src/timestamp/index.ts';
import {
  ASSET,
  ATTESTATION_IDS,
  CLAIM_GENERATOR,
  RUN_ID,
  TITLE,
  testSigner,
} from '../../unit/c2pa/fixtures.ts';
import { stack, uniqueName } from '../../helpers/stack.ts';

const exec = promisify(execFile);

let parts: { bytes: Buffer; manifest: Buffer; metadata: object };
let ca: X509Certificate;
let tsaAnchor: X509Certificate;
let otherAnchor: X509Certificate;

beforeAll(async () => {
  const { pki, signer } = await testSigner();
  ca = new X509Certificate(pki['ca.crt']);
  tsaAnchor = new X509Certificate(await readFile(stack().env.TSA_TRUST_ANCHORS!, 'utf8'));
  otherAnchor = new X509Certificate((await generateDevPki())['ca.crt']);
  const tsa = createTsaClient({ url: stack().env.TSA_URL!, trustAnchors: [tsaAnchor], deadlineMs: 20_000 });
  const manifest = buildManifest({
    asset: ASSET,
    mimeType: 'application/json',
    title: TITLE,
    signer,
    attestationIds: ATTESTATION_IDS,
    runId: RUN_ID,
    claimGenerator: CLAIM_GENERATOR,
  });
  const signature = signer.sign(ASSET);
  const stamped = await tsa.timestamp(signature);
  parts = {
    bytes: ASSET,
    manifest: manifest.store,
    metadata: {
      digest: aibomDigest(ASSET),
      attestation_ids: ATTESTATION_IDS,
      signature: {
        ...signatureMetadata(signer),
        signature: signature.toString('base64'),
        timestamp: {
          time: stamped.genTime.toISOString(),
          tsa: stamped.tsa,
          signed_timestamp: stamped.response.toString('base64'),
        },
      },
    },
  };
});

describe('the time-stamp of an AIBOM runtime signature', () => {
  it('without a TSA anchor is not checked and the AIBOM verifies, judged now (as records are)', () => {
    const r = verifyAibomArtifact(parts, [ca], []);
    expect(r.problems).toEqual([]);
    expect(r.lines).toContainEqual(
      expect.stringMatching(/^timestamp {2}\S+ by .+: not checked \(no TSA trust anchor was given\)/),
    );
  });

  it('with an anchor that is not its TSA’s still fails TIMESTAMP_UNTRUSTED_TSA', () => {
    const r = verifyAibomArtifact(parts, [ca], [otherAnchor]);
    expect(r.problems.map((p) => [p.part, p.code])).toEqual([['metadata', 'TIMESTAMP_UNTRUSTED_TSA']]);
  });

  it('with its TSA’s anchor is judged at its time', () => {
    const r = verifyAibomArtifact(parts, [ca], [tsaAnchor]);
    expect(r.problems).toEqual([]);
    expect(r.lines).toContainEqual(expect.stringMatching(/certificates valid then$/));
  });

  it('a stated time or TSA that is not its token’s does not verify (they are unsigned copies)', () => {
    const meta = parts.metadata as { signature: { timestamp: { time: string; tsa: string } } };
    for (const change of [{ time: '1999-01-01T00:00:00.000Z' }, { tsa: 'CN=evil' }]) {
      const edited = structuredClone(meta);
      Object.assign(edited.signature.timestamp, change);
      const r = verifyAibomArtifact({ ...parts, metadata: edited }, [ca], [tsaAnchor]);
      expect(r.problems.map((p) => p.code)).toEqual(['METADATA_MISMATCH']);
    }
  });

  it('service-ctl verify --aibom DIR --trust-anchor ca.pem passes in a shell without the stack’s env', async () => {
    const dir = join(stack().root, uniqueName('aibom-ts'));
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'aibom.json'), parts.bytes);
    await writeFile(join(dir, 'aibom.c2pa'), parts.manifest);
    await writeFile(join(dir, 'aibom.meta.json'), JSON.stringify(parts.metadata));
    await writeFile(join(dir, 'ca.pem'), ca.toString());
    // A clean shell: PATH and HOME only (no TSA_TRUST_ANCHORS, SERVICE_TRUST_ANCHOR, ...).
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
    const args = [join(repoRoot, 'src/bin/service-ctl.ts'), 'verify', '--aibom', dir];
    const ok = await exec(process.execPath, [...args, '--trust-anchor', join(dir, 'ca.pem')], { env });
    expect(ok.stdout).toContain('AIBOM verified');
    await writeFile(join(dir, 'other.pem'), otherAnchor.toString());
    const refused = await exec(
      process.execPath,
      [...args, '--trust-anchor', join(dir, 'ca.pem'), '--tsa-trust-anchor', join(dir, 'other.pem')],
      { env },
    ).then(
      () => ({ code: 0, out: '' }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('TIMESTAMP_UNTRUSTED_TSA');
  });
});

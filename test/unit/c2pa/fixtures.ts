import { generateDevPki, type DevPki, type DevPkiOptions } from '../../../hack/dev-pki.ts';
import { signerFromPem, type KeySigner } from '../../../src/signing/index.ts';

/** A signer with its PKI, generated in memory (never committed). */
export interface TestSigner {
  pki: DevPki;
  signer: KeySigner;
}

export async function testSigner(options: DevPkiOptions = {}): Promise<TestSigner> {
  const pki = await generateDevPki(options);
  // Loaded without ca.crt so expired/foreign chains can be built for negative tests.
  const signer = signerFromPem({ 'tls.crt': pki['tls.crt'], 'tls.key': pki['tls.key'] });
  return { pki, signer };
}

export const ATTESTATION_IDS = [
  '01936f3c-7a1e-7c3a-9d2e-3f4b5c6d7e01',
  '01936f3c-7a1e-7c3a-9d2e-3f4b5c6d7e02',
  '01936f3c-7a1e-7c3a-9d2e-3f4b5c6d7e03',
];
export const RUN_ID = '6b0d7c1e-2f3a-4b5c-8d9e-0a1b2c3d4e5f';
export const TITLE = `aibom-${RUN_ID}.json`;
export const CLAIM_GENERATOR = 'aibom-vault/0.1.0';

/** Stand-in AIBOM bytes; the manifest binds bytes, not JSON semantics. */
export const ASSET = Buffer.from(
  JSON.stringify({
    bom_format: 'CycloneDX',
    spec_version: '1.5',
    serial_number: 'urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79',
    metadata: { run_id: RUN_ID, status: 'succeeded' },
    trust: { attestation_ids: ATTESTATION_IDS },
  }),
  'utf8',
);

/** A copy of `data` with the byte at `index` changed. */
export function flipByte(data: Buffer, index: number): Buffer {
  const copy = Buffer.from(data);
  copy[index] = (copy[index] as number) ^ 0x01;
  return copy;
}

/** A copy of `data` with the first occurrence of `from` replaced by `to` (same length). */
export function replaceOnce(data: Buffer, from: string, to: string): Buffer {
  if (Buffer.byteLength(from) !== Buffer.byteLength(to)) throw new Error('replacement must keep the length');
  const at = data.indexOf(from);
  if (at < 0) throw new Error(`"${from}" not found`);
  const copy = Buffer.from(data);
  copy.write(to, at, 'utf8');
  return copy;
}

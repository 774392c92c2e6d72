import type { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { readBiscuit } from '../../../src/capability/biscuit.ts';
import { validateChain } from '../../../src/signing/chain.ts';
import { parseCertificates } from '../../../src/signing/pem.ts';
import { signerFromPem } from '../../../src/signing/index.ts';
import { biscuitRootOf, capabilityEnvelopes, tokenOf } from '../../helpers/capabilities.ts';

/**
 * Error messages carry no values from what they judge (issue 22, left alone before): a chain's
 * certificate names are whatever its maker wrote, and a Biscuit root key is the record's or the
 * caller's. The messages reach problem+json answers, CLI output and logs; they say which
 * certificate by position, and never quote the key.
 */
const MARKER = 'Pay-to-IBAN-DE00';
let leaf: X509Certificate;
let intermediate: X509Certificate;
let root: X509Certificate;
let foreignRoot: X509Certificate;

beforeAll(async () => {
  const pki = await generateDevPki({
    intermediate: true,
    leafCommonName: `${MARKER} signer`,
    caCommonName: `${MARKER} CA`,
  });
  [leaf, intermediate] = parseCertificates(pki['tls.crt'], 'tls.crt') as [X509Certificate, X509Certificate];
  [root] = parseCertificates(pki['ca.crt'], 'ca.crt') as [X509Certificate];
  [foreignRoot] = parseCertificates((await generateDevPki())['ca.crt'], 'ca.crt') as [X509Certificate];
});

describe('validateChain messages', () => {
  it('name no certificate: untrusted, broken, expired, not yet valid', () => {
    const results = [
      validateChain([leaf, intermediate], [foreignRoot], new Date()),
      validateChain([leaf, leaf], [root], new Date()),
      validateChain([leaf, root], [root], new Date()),
      validateChain([leaf, intermediate], [root], new Date(leaf.validToDate.getTime() + 1000)),
      validateChain([leaf, intermediate], [root], new Date(leaf.validFromDate.getTime() - 1000)),
    ];
    expect(results.map((r) => (r.ok ? 'ok' : r.failure))).toEqual([
      'UNTRUSTED',
      'BROKEN',
      'BROKEN',
      'EXPIRED',
      'NOT_YET_VALID',
    ]);
    for (const r of results) {
      if (r.ok) continue;
      expect(r.message).not.toContain(MARKER);
      expect(r.message).not.toContain('CN=');
    }
    expect(results.map((r) => (r.ok ? '' : r.message))).toEqual([
      'the certificate chain does not lead to a trust anchor',
      'certificate 1 of the chain is not issued and signed by certificate 2, a CA',
      'certificate 1 of the chain is not issued and signed by certificate 2, a CA',
      `the signer certificate expired at ${leaf.validToDate.toISOString()}`,
      `the signer certificate is not valid before ${leaf.validFromDate.toISOString()}`,
    ]);
  });
});

describe('Biscuit root key messages', () => {
  it('never quote the root key they were given', async () => {
    const signer = signerFromPem(await generateDevPki());
    const { capability } = await capabilityEnvelopes(signer);
    const token = tokenOf(capability, 'biscuit');
    const hostile = `ed25519/${MARKER}`;
    await expect(readBiscuit(token, hostile)).rejects.toSatisfy(
      (e: Error) => !e.message.includes(MARKER) && (e as { code?: string }).code === 'TOKEN_UNTRUSTED',
    );
    const other = biscuitRootOf(
      (await capabilityEnvelopes(signerFromPem(await generateDevPki()))).capability,
    );
    expect(other).not.toBe(biscuitRootOf(capability));
    await expect(readBiscuit(token, other)).rejects.toSatisfy(
      (e: Error) =>
        !e.message.includes(other.slice(8, 24)) && (e as { code?: string }).code === 'TOKEN_UNTRUSTED',
    );
  });
});

import type { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { validateChain } from '../../../src/signing/chain.ts';
import { generateDevPki } from '../../../hack/dev-pki.ts';
import { parseCertificates } from '../../../src/signing/pem.ts';

let leaf: X509Certificate;
let intermediate: X509Certificate;
let root: X509Certificate;
let foreignRoot: X509Certificate;
const now = new Date();

beforeAll(async () => {
  const pki = await generateDevPki({ intermediate: true, caAlgorithm: 'ED25519' });
  [leaf, intermediate] = parseCertificates(pki['tls.crt'], 'tls.crt') as [X509Certificate, X509Certificate];
  [root] = parseCertificates(pki['ca.crt'], 'ca.crt') as [X509Certificate];
  [foreignRoot] = parseCertificates((await generateDevPki())['ca.crt'], 'ca.crt') as [X509Certificate];
});

describe('validateChain', () => {
  it('accepts leaf → intermediate → anchor (Ed25519 CAs)', () => {
    const result = validateChain([leaf, intermediate], [foreignRoot, root], now);
    expect(result.ok).toBe(true);
    expect(result.ok && result.anchor.raw.equals(root.raw)).toBe(true);
  });

  it('accepts a chain that includes the root, and a pinned leaf', () => {
    expect(validateChain([leaf, intermediate, root], [root], now).ok).toBe(true);
    expect(validateChain([leaf], [leaf], now).ok).toBe(true);
    expect(validateChain([leaf], [intermediate], now).ok).toBe(true);
  });

  it('rejects foreign anchors, missing intermediates, wrong order, non-CA issuers, empty chains', () => {
    const failure = (chain: X509Certificate[], anchors: X509Certificate[]) => {
      const r = validateChain(chain, anchors, now);
      return r.ok ? 'ok' : r.failure;
    };
    expect(failure([leaf, intermediate], [foreignRoot])).toBe('UNTRUSTED');
    expect(failure([leaf], [root])).toBe('UNTRUSTED');
    expect(failure([leaf, root], [root])).toBe('BROKEN');
    expect(failure([leaf, leaf], [root])).toBe('BROKEN'); // leaf is not a CA
    expect(failure([], [root])).toBe('BROKEN');
    expect(
      failure(
        Array.from({ length: 9 }, () => leaf),
        [root],
      ),
    ).toBe('BROKEN');
  });

  it('checks validity of every certificate on the path at the given time', () => {
    const after = new Date(leaf.validToDate.getTime() + 1000);
    const before = new Date(leaf.validFromDate.getTime() - 1000);
    const r1 = validateChain([leaf, intermediate], [root], after);
    expect(r1.ok ? 'ok' : r1.failure).toBe('EXPIRED');
    const r2 = validateChain([leaf, intermediate], [root], before);
    expect(r2.ok ? 'ok' : r2.failure).toBe('NOT_YET_VALID');
  });
});

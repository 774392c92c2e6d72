import { describe, expect, it } from 'vitest';
import { TrustBundleError, trustBundleOf } from '../../../src/attest/trust-bundle.ts';
import { BaseError, hasCode } from '../../../src/errors.ts';
import { BundleError } from '../../../src/export/bundle.ts';
import { LineSplitter, LineTooLongError } from '../../../src/export/lines.ts';
import { tarHeader, TarEntryTooLargeError, TarHeaderError, TarPathError } from '../../../src/export/tar.ts';

/** The failures the verifier reads (tar, lines, trust bundle) and the writer's: the shared base, with codes. */
describe('errors of the export reader and writer and of the trust bundle', () => {
  it('extend BaseError with a stable code', () => {
    const cases: [BaseError, string][] = [
      [new TarPathError('x'), 'TAR_PATH_INVALID'],
      [new TarHeaderError('p', 'x'), 'TAR_HEADER_INVALID'],
      [new TarEntryTooLargeError('p', 'x'), 'TAR_ENTRY_TOO_LARGE'],
      [new LineTooLongError(1, 2), 'LINE_TOO_LONG'],
      [new BundleError('x'), 'BUNDLE_INVALID'],
      [new TrustBundleError('x'), 'TRUST_BUNDLE_INVALID'],
    ];
    for (const [err, code] of cases) {
      expect(err).toBeInstanceOf(BaseError);
      expect(hasCode(err, code), code).toBe(true);
      expect(err.name).toBe(err.constructor.name);
    }
  });

  it('are what the code paths throw', () => {
    expect(() => tarHeader('../escape', 1)).toThrow(TarPathError);
    const s = new LineSplitter(4, () => {});
    expect(() => s.push(Buffer.from('abcdefgh'))).toThrow(
      expect.objectContaining({ code: 'LINE_TOO_LONG', line: 1 }),
    );
    let caught: unknown;
    try {
      trustBundleOf({ trust_anchors_pem: 'not pem', signers: [] });
    } catch (err) {
      caught = err;
    }
    expect(hasCode(caught, 'TRUST_BUNDLE_INVALID')).toBe(true);
    expect((caught as Error).cause).toBeDefined();
  });
});

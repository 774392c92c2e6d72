import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { AttestError, canonicalJson, jcsSha256Hex } from '../../../src/attest/index.ts';

describe('RFC 8785 canonical JSON', () => {
  it('sorts members by UTF-16 code units and drops whitespace (RFC 8785 §3.2.3 example order)', () => {
    const value = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    // RFC 8785 §3.2.3: the sorted order of these property names ("1" is not hoisted as in JS objects).
    expect(canonicalJson(value)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('serialises numbers the ECMAScript way (RFC 8785 §3.2.2.3)', () => {
    expect(canonicalJson([1e21, 1e-7, -0, 0.000001, Number('333333333.33333329'), 1.0, 4.5])).toBe(
      '[1e+21,1e-7,0,0.000001,333333333.3333333,1,4.5]',
    );
  });

  it('escapes strings minimally', () => {
    expect(canonicalJson({ s: '\u0000\u001f"\\/\u007f€' })).toBe('{"s":"\\u0000\\u001f\\"\\\\/\u007f€"}');
  });

  it('omits undefined members but rejects non-JSON values', () => {
    expect(canonicalJson({ b: 1, a: undefined })).toBe('{"b":1}');
    for (const bad of [undefined, NaN, -Infinity, 10n, Symbol('x'), new Uint8Array(1), [1, undefined]]) {
      expect(() => canonicalJson(bad)).toThrow(AttestError);
    }
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(AttestError);
  });

  it('takes each path: already sorted, sorted copy (incl. a "__proto__" member), integer-like names, errors', () => {
    // Already in JCS member order: serialised as it stands.
    expect(canonicalJson({ a: [{ x: 1, y: '2' }], b: null })).toBe('{"a":[{"x":1,"y":"2"}],"b":null}');
    // Unsorted: a sorted copy. A member named "__proto__" (JSON.parse makes it an own property) must
    // stay a member of the copy, not become its prototype.
    const proto = JSON.parse('{"__proto__":{"b":1,"a":2},"":false}') as unknown;
    expect(canonicalJson(proto)).toBe('{"":false,"__proto__":{"a":2,"b":1}}');
    // Integer-like names, which JS objects always order numerically: the member-by-member writer.
    expect(canonicalJson({ 10: 'ten', 9: 'nine', a: { 2: 0, 10: 1 } })).toBe(
      '{"10":"ten","9":"nine","a":{"10":1,"2":0}}',
    );
    // Errors name the path, whichever pass met them first.
    expect(() => canonicalJson({ b: { c: [1, NaN] }, a: 1 })).toThrow('$.b.c[1] is a non-finite number');
    expect(() => canonicalJson({ a: { when: new Date(0) } })).toThrow('$.a.when is a class instance');
  });

  it('hashes the canonical UTF-8 bytes', () => {
    // echo -n '{"a":1,"b":[true,null]}' | sha256sum
    expect(jcsSha256Hex({ b: [true, null], a: 1 })).toBe(
      '1cc69c7fa23616ca2ec3ee70d24390a6225c8832db8a4c814c7e0e7f942f8668',
    );
  });
});

describe('canonicalJson against an independent JCS implementation', () => {
  it('equals the canonicalize package on random JSON values', async () => {
    const { default: fc } = await import('fast-check');
    const { default: canonicalize } = await import('canonicalize');
    const { canonicalJson: jcs } = await import('../../../src/attest/json.ts');
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
        expect(jcs(v)).toBe(canonicalize(v));
      }),
      { numRuns: 3000 },
    );
    // Sorting by UTF-16 code units, not code points: U+FB01 sorts after U+1F600's high surrogate.
    const tricky = { '\u{1F600}': 1, '\uFB01': 2, a: -0, b: 1e21, c: 5e-7, d: '\u2028\u0007' };
    expect(jcs(tricky)).toBe(canonicalize(tricky));
    // Lone surrogates are not I-JSON: both refuse them.
    expect(() => canonicalize({ d: '\ud800' })).toThrow();
    expect(() => jcs({ d: '\ud800' })).toThrow(/lone surrogate/);
  });

  it('refuses lone surrogates in already-sorted values, which pass 1 leaves to the text it writes', () => {
    // Sorted objects and arrays, so the fast pass takes them: a lone surrogate anywhere (value,
    // member name, array item, deep) is still refused, with its path.
    expect(() => canonicalJson({ a: 1, b: 'x\udfffy' })).toThrow('$.b is a string with a lone surrogate');
    expect(() => canonicalJson({ a: { '\ud83d': 1 } })).toThrow(
      '$.a.\ud83d is a member name with a lone surrogate',
    );
    expect(() => canonicalJson(['ok', ['\udc00']])).toThrow('$[1][0] is a string with a lone surrogate');
    expect(() => canonicalJson('\ud800')).toThrow('$ is a string with a lone surrogate');
    // What JSON.stringify writes for them is `\udXXX`; a real backslash before "ud" is text, the
    // same as the independent implementation gives.
    for (const v of [{ a: '\\ud800' }, { a: 'C:\\udev' }, ['\\\\ud83d'], { '\\udc00': '\u{1F600}' }]) {
      expect(canonicalJson(v)).toBe(canonicalize(v));
    }
    expect(canonicalJson({ a: '\\ud800' })).toBe('{"a":"\\\\ud800"}');
  });
});

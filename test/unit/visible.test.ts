import { describe, expect, it } from 'vitest';
import { visibleText } from '../../src/visible.ts';

describe('visibleText', () => {
  it('writes every format character (category Cf) as [U+XXXX] and leaves the rest alone', () => {
    expect(visibleText('user:\u202eecila')).toBe('user:[U+202E]ecila');
    expect(visibleText('\u00ad\u061c\u200b\u200d\u2066\ufeff\u{e0001}')).toBe(
      '[U+00AD][U+061C][U+200B][U+200D][U+2066][U+FEFF][U+E0001]',
    );
    // Letters of any script, combining marks, emoji and controls are not format characters.
    for (const s of ['user:alice', 'Ärztin', 'مرحبا', 'e\u0301', '👩‍💻'.replace('\u200d', ''), 'a\tb']) {
      expect(visibleText(s)).toBe(s);
    }
    // Every code point of category Cf, and none other, is rewritten (one assertion, not 1.1 M).
    const wrong: string[] = [];
    for (let c = 0; c <= 0x10ffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      const ch = String.fromCodePoint(c);
      if ((visibleText(ch) !== ch) !== /\p{Cf}/u.test(ch)) wrong.push(`U+${c.toString(16)}`);
    }
    expect(wrong).toEqual([]);
  });
});

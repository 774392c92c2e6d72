/**
 * Duplicate keys in JSON text. `JSON.parse` keeps the last of two equal keys without a word, so
 * this reads the raw text: a small RFC 8259 scanner that records, for every object, each key it
 * has seen. Throws on text that is not JSON.
 */
export function duplicateKeys(text: string): string[] {
  let i = 0;
  const found: string[] = [];
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${i}`);
  };
  const string = (): string => {
    if (text[i] !== '"') fail('expected a string');
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail('unterminated string');
    i++;
    // The key as JSON means it: escapes decoded, so "a" and "\u0061" are the same key.
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = string();
        if (seen.has(key)) found.push(`${path}/${key}`);
        seen.add(key);
        ws();
        if (text[i] !== ':') fail('expected ":"');
        i++;
        value(`${path}/${key}`);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return;
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${path}/${n}`);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') {
      string();
      return;
    }
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 64));
    if (!m) fail('expected a value');
    i += m![0].length;
  };
  value('');
  ws();
  if (i !== text.length) fail('trailing text');
  return found;
}

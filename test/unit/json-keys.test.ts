import { describe, expect, it } from 'vitest';
import { duplicateKeys } from '../helpers/json-keys.ts';

describe('duplicateKeys (the log test relies on it)', () => {
  it('finds a repeated key that JSON.parse silently collapses', () => {
    const line = '{"level":30,"name":"controller","pid":1,"name":"x","msg":"m"}';
    expect(JSON.parse(line)).toMatchObject({ name: 'x' });
    expect(duplicateKeys(line)).toEqual(['/name']);
  });

  it('finds them nested and through escapes, and not across objects or arrays', () => {
    expect(duplicateKeys('{"a":{"b":1,"\\u0062":2},"c":[{"d":1},{"d":2}]}')).toEqual(['/a/b']);
    expect(duplicateKeys('{"a":"{\\"a\\":1}","b":[1,"x",null,true,-1.5e3,{}]}')).toEqual([]);
  });

  it('refuses what is not JSON', () => {
    expect(() => duplicateKeys('{"a":1')).toThrow(SyntaxError);
    expect(() => duplicateKeys('{"a":1} x')).toThrow(SyntaxError);
    expect(() => duplicateKeys("{'a':1}")).toThrow(SyntaxError);
  });
});

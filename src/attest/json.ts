import canonicalize from 'canonicalize';
import { hash } from 'node:crypto';
import { AttestError } from './errors.ts';

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * Rejects what JSON.stringify (and therefore `canonicalize`) would silently turn into something
 * else: functions/symbols (dropped or printed as "undefined"), BigInt, non-finite numbers, class
 * instances such as Date, Map or Buffer (their toJSON or enumerable fields would be hashed, not
 * what the caller meant), `undefined` array elements (become null). `undefined` object members are
 * allowed and omitted, matching optional properties. Cycles throw in `canonicalize`.
 */
function assertPlainJson(value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw notJson(path, 'a non-finite number');
      return;
    case 'object': {
      if (value === null) return;
      if (ancestors.has(value)) throw notJson(path, 'a circular reference');
      ancestors.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (value[i] === undefined) throw notJson(`${path}[${i}]`, 'undefined');
          assertPlainJson(value[i], `${path}[${i}]`, ancestors);
        }
      } else {
        const proto = Object.getPrototypeOf(value) as unknown;
        if (proto !== Object.prototype && proto !== null) throw notJson(path, 'a class instance');
        for (const [key, member] of Object.entries(value)) {
          if (member !== undefined) assertPlainJson(member, `${path}.${key}`, ancestors);
        }
      }
      // Only ancestors count: the same object twice in sibling positions is not a cycle.
      ancestors.delete(value);
      return;
    }
    default:
      throw notJson(path, `a ${typeof value}`);
  }
}

function notJson(path: string, what: string): AttestError {
  return new AttestError('NOT_CANONICALIZABLE', `${path} is ${what}, not a JSON value`);
}

/** RFC 8785 (JCS) canonical JSON of a plain JSON value; throws `AttestError` NOT_CANONICALIZABLE. */
export function canonicalJson(value: unknown): string {
  assertPlainJson(value, '$', new Set());
  try {
    // Only a top-level undefined yields undefined, and assertPlainJson has excluded it.
    return canonicalize(value) as string;
  } catch (cause) {
    throw new AttestError('NOT_CANONICALIZABLE', (cause as Error).message, { cause });
  }
}

/** Lower-case hex SHA-256 (one-shot `crypto.hash`, about twice `createHash` for small inputs). */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data);
}

/** Hex SHA-256 of the UTF-8 bytes of the JCS canonical JSON of `value`. */
export function jcsSha256Hex(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

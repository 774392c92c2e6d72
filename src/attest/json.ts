import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { BaseError } from '../errors.ts';
import { AttestError } from './errors.ts';

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * RFC 8785 (JCS) canonical JSON. JCS serialises strings and numbers exactly as ECMAScript's
 * JSON.stringify does and sorts object members by their UTF-16 code units (what
 * Array.prototype.sort and `<` compare); JSON.stringify writes members in property order. So the
 * canonical form is JSON.stringify of the value with every object's members in sorted order:
 *
 * 1. if every object already has its members sorted (checked, nothing allocated), JSON.stringify;
 * 2. else a validated copy with members inserted in sorted order, then JSON.stringify (about 2x
 *    faster than serialising member by member, the signing path's largest cost after the signature);
 * 3. anything either pass cannot take — integer-like member names (which JS objects always order
 *    numerically, so no copy can hold them in JCS order), a member named `__proto__`, and invalid
 *    values — is checked (an invalid value is reported with its path) and serialised by the
 *    `canonicalize` package, member by member.
 * Passes 1 and 2 exist for speed only (the signing goal in docs/bench.md; ADR 0006); the property
 * test checks the whole function against `canonicalize`.
 *
 * Rejected (what JSON.stringify would silently turn into something else): functions/symbols,
 * BigInt, non-finite numbers, class instances such as Date, Map or Buffer (their toJSON or
 * enumerable fields would be hashed, not what the caller meant), `undefined` array elements, and
 * cycles. `undefined` object members are omitted, matching optional properties.
 */

/** Property names JS orders as array indexes (ascending numeric order, before all others). */
const INDEX_LIKE = /^(?:0|[1-9][0-9]*)$/;

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * True when JSON.stringify(value) is already its JCS form (and value is valid JSON), but for lone
 * surrogates: strings are not checked here (isWellFormed on every string and member name cost
 * ~20% of canonicalising a statement) because JSON.stringify escapes a lone surrogate as `\udXXX`,
 * which canonicalJson looks for in the text it made (see LONE_SURROGATE_ESCAPE).
 */
function stringifiesCanonically(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      // Cycles are found in pass 3; a depth this large is either one or pathological.
      if (depth > 256) return false;
      if (Array.isArray(value)) {
        for (const item of value as unknown[]) {
          if (item === undefined || !stringifiesCanonically(item, depth + 1)) return false;
        }
        return true;
      }
      if (!isPlain(value)) return false;
      const obj = value as Record<string, unknown>;
      // for-in, not Object.keys: no array per object (~40% of this walk). It visits own members in
      // Object.keys order, then inherited enumerable ones (none on a plain object unless
      // Object.prototype was polluted, and then checking more than JSON.stringify writes is safe).
      let previous: string | undefined;
      for (const key in obj) {
        if (previous !== undefined && !(previous < key)) return false;
        previous = key;
        const member = obj[key];
        if (member === undefined || !stringifiesCanonically(member, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/**
 * Thrown by sortedCopy for anything it cannot take; canonicalJson then takes pass 3. Control flow
 * only: it never leaves this module.
 */
class NotCopyable extends BaseError<'NOT_COPYABLE'> {}
const NOT_COPYABLE = new NotCopyable('NOT_COPYABLE', 'not copyable in JCS member order');

/** A copy whose objects hold their members in JCS order; throws NOT_COPYABLE (see above). */
function sortedCopy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw NOT_COPYABLE;
      return value;
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw NOT_COPYABLE;
      return value;
    case 'object': {
      if (value === null) return null;
      if (depth > 256) throw NOT_COPYABLE;
      if (Array.isArray(value)) {
        const items = value as unknown[];
        const out: unknown[] = new Array<unknown>(items.length);
        for (let i = 0; i < items.length; i++) {
          if (items[i] === undefined) throw NOT_COPYABLE;
          out[i] = sortedCopy(items[i], depth + 1);
        }
        return out;
      }
      if (!isPlain(value)) throw NOT_COPYABLE;
      const obj = value as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(obj).sort()) {
        // Assigning "__proto__" would set the copy's prototype instead of adding the member (found
        // by the property test); such objects take pass 3, as integer-like names do. (A
        // prototype-less copy would take it, but V8 keeps those in dictionary mode: ~5% slower.)
        // The regex only for names starting with a digit: it ran once per member and cost ~15% of
        // canonicalising a statement (profile of `npm run bench -- sign`, docs/bench.md).
        const c = key.charCodeAt(0);
        if ((c >= 0x30 && c <= 0x39 && INDEX_LIKE.test(key)) || key === '__proto__' || !key.isWellFormed())
          throw NOT_COPYABLE;
        const member = obj[key];
        if (member !== undefined) out[key] = sortedCopy(member, depth + 1);
      }
      return out;
    }
    default:
      throw NOT_COPYABLE;
  }
}

/**
 * Throws NOT_CANONICALIZABLE, naming the path, for anything that is not a JSON value in the sense
 * above. canonicalize (the library) would turn some of it into something else: call toJSON, write
 * `null` for an undefined array element. `path` is a stack of member names and indexes, turned
 * into text only for the error.
 */
function assertJson(value: unknown, path: (string | number)[], ancestors: Set<object>): void {
  const fail = (what: string): AttestError =>
    notJson(path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join(''), what);
  switch (typeof value) {
    case 'string':
      // I-JSON (RFC 8785 §3.2.2.2): lone surrogates cannot be represented in UTF-8.
      if (!value.isWellFormed()) throw fail('a string with a lone surrogate');
      return;
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw fail('a non-finite number');
      return;
    case 'object': {
      if (value === null) return;
      if (ancestors.has(value)) throw fail('a circular reference');
      ancestors.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          path.push(i);
          if (value[i] === undefined) throw fail('undefined');
          assertJson(value[i], path, ancestors);
          path.pop();
        }
      } else {
        if (!isPlain(value)) throw fail('a class instance');
        const obj = value as Record<string, unknown>;
        for (const key of Object.keys(obj)) {
          path.push(key);
          if (!key.isWellFormed()) throw fail('a member name with a lone surrogate');
          if (obj[key] !== undefined) assertJson(obj[key], path, ancestors);
          path.pop();
        }
      }
      // Only ancestors count: the same object twice in sibling positions is not a cycle.
      ancestors.delete(value);
      return;
    }
    default:
      throw fail(`a ${typeof value}`);
  }
}

function notJson(path: string, what: string): AttestError {
  return new AttestError('NOT_CANONICALIZABLE', `$${path} is ${what}, not a JSON value`);
}

/**
 * Where JSON.stringify wrote a lone surrogate (ES2019 well-formed JSON.stringify writes each as
 * `\ud800`–`\udfff`, lower-case; a well-formed string never yields `\ud` but after an escaped
 * backslash, `\\ud`). A hit, real or not, sends the value to the checked passes, which reject
 * lone surrogates or, for an escaped backslash, give the same text.
 */
const LONE_SURROGATE_ESCAPE = '\\ud';

/** RFC 8785 (JCS) canonical JSON of a plain JSON value; throws `AttestError` NOT_CANONICALIZABLE. */
export function canonicalJson(value: unknown): string {
  if (stringifiesCanonically(value, 0)) {
    const text = JSON.stringify(value);
    if (!text.includes(LONE_SURROGATE_ESCAPE)) return text;
  }
  let copy: unknown;
  try {
    copy = sortedCopy(value, 0);
  } catch (err) {
    if (!(err instanceof NotCopyable)) throw err;
    assertJson(value, [], new Set());
    return canonicalize(value) as string;
  }
  return JSON.stringify(copy);
}

/** Lower-case hex SHA-256 (one-shot `crypto.hash`, about twice `createHash` for small inputs). */
export function sha256Hex(data: string | Buffer): string {
  return hash('sha256', data);
}

/** Hex SHA-256 of the UTF-8 bytes of the JCS canonical JSON of `value`. */
export function jcsSha256Hex(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

/**
 * Structural equality of JSON-shaped values as the API server (or PostgreSQL's JSONB) stores them:
 * object key order does not matter, and a key whose value is `undefined` counts as absent (it is
 * never serialised). Arrays are ordered. Unlike comparing `JSON.stringify` output, two equal
 * objects built in different key orders compare equal, so a controller does not rewrite a status
 * that only came back from the server with its keys in another order.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const y = b as unknown[];
    return a.length === y.length && a.every((v, i) => jsonEqual(v, y[i]));
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = (o: Record<string, unknown>) => Object.keys(o).filter((k) => o[k] !== undefined);
  const kx = keys(x);
  if (kx.length !== keys(y).length) return false;
  return kx.every((k) => Object.hasOwn(y, k) && jsonEqual(x[k], y[k]));
}

import { asInt, decodeCbor, encodeCbor, isMap } from '../cose/cbor.ts';

/**
 * Concise problem details (RFC 9290), the error bodies of SCRAPI
 * (`application/concise-problem-details+cbor`). Keys -1..-4 are the standard members; ours add
 * the stable error code under the text key "code".
 */

export interface ProblemDetails {
  readonly title?: string;
  readonly detail?: string;
  readonly instance?: string;
  readonly responseCode?: number;
  /** Any other members, by their CBOR key. */
  readonly extra?: ReadonlyMap<unknown, unknown>;
}

/** RFC 9290 keys: -1 title, -2 detail, -3 instance, -4 response-code. */
export function decodeProblemDetails(body: Uint8Array): ProblemDetails | undefined {
  let value: unknown;
  try {
    value = decodeCbor(body);
  } catch {
    return undefined;
  }
  if (!isMap(value)) return undefined;
  const text = (k: number): string | undefined => {
    const v = value.get(k);
    return typeof v === 'string' ? v : undefined;
  };
  const extra = new Map([...value].filter(([k]) => !(typeof k === 'number' && k >= -4 && k <= -1)));
  const code = asInt(value.get(-4));
  const title = text(-1);
  const detail = text(-2);
  const instance = text(-3);
  return {
    ...(title !== undefined ? { title } : {}),
    ...(detail !== undefined ? { detail } : {}),
    ...(instance !== undefined ? { instance } : {}),
    ...(code !== undefined ? { responseCode: code } : {}),
    ...(extra.size > 0 ? { extra } : {}),
  };
}

export function encodeProblemDetails(problem: ProblemDetails): Buffer {
  const m = new Map<unknown, unknown>();
  if (problem.title !== undefined) m.set(-1, problem.title);
  if (problem.detail !== undefined) m.set(-2, problem.detail);
  if (problem.instance !== undefined) m.set(-3, problem.instance);
  if (problem.responseCode !== undefined) m.set(-4, problem.responseCode);
  for (const [k, v] of problem.extra ?? []) m.set(k, v);
  return encodeCbor(m);
}

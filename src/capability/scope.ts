/**
 * Scopes and principals of capability chains, and what "narrow" means (docs/capabilities.md).
 *
 * A scope is `*` (everything) or one or more segments separated by `:` (`kb`, `kb:read`,
 * `tickets:comment`, `dataset:read:incidents-7`), 1-253 characters. A segment is at least one
 * character other than `:`, `*`, whitespace (any Unicode space, line or paragraph separator, the
 * BOM) and control characters. Segments are a hierarchy, most general first.
 *
 * `covers(p, q)`: q is within p when p is `*`, or the segments of p are a prefix of the segments of
 * q: `kb` covers `kb`, `kb:read` and `kb:read:draft`; `kb:read` covers `kb:read:draft` but not `kb`,
 * `kb:write` or `kbx:read` (segments compare whole, never as character prefixes). A delegation
 * chain narrows when each link's scope is covered by the scope of the link before it: equal is
 * allowed (re-delegation without attenuation), wider or unrelated never.
 *
 * The CRD (crds/vault.service.dev_runs.yaml) carries the same grammar as a pattern and the same
 * `covers` as CEL, so a Run that widens is refused at admission; the recorder checks again
 * (Runs admitted before the rule), and `service-ctl verify` checks what was signed.
 */

export const SCOPE_MAX = 253;
export const PRINCIPAL_MAX = 253;

const SEGMENT = String.raw`[^:*\s\p{Z}\u{FEFF}\p{Cc}\p{Cf}]+`;
/** The scope grammar (JavaScript `u` flag). The CRD spells `\u{FEFF}` as `\x{FEFF}` (RE2). */
export const SCOPE_PATTERN = new RegExp(String.raw`^(?:\*|${SEGMENT}(?::${SEGMENT})*)$`, 'u');

/**
 * A principal (granter or approver): `<type>:<name>`, the type lower-case ASCII letters, digits and
 * `-` starting with a letter (`user`, `team`, `group`, `serviceaccount`, `system`), the name any
 * characters but whitespace, control and format characters (bidi overrides, zero-width: a name
 * that reads as another) (`user:alice@example.com`,
 * `system:serviceaccount:ns:pipeline`). 3-253 characters.
 */
export const PRINCIPAL_PATTERN = /^[a-z][a-z0-9-]*:[^\s\p{Z}\u{FEFF}\p{Cc}\p{Cf}]+$/u;

const length = (s: string): number => [...s].length;

export function isScope(value: unknown): value is string {
  return typeof value === 'string' && length(value) <= SCOPE_MAX && SCOPE_PATTERN.test(value);
}

export function isPrincipal(value: unknown): value is string {
  return typeof value === 'string' && length(value) <= PRINCIPAL_MAX && PRINCIPAL_PATTERN.test(value);
}

/** Whether scope `inner` is within scope `outer` (both valid scopes); see the module comment. */
export function covers(outer: string, inner: string): boolean {
  return outer === '*' || inner === outer || inner.startsWith(`${outer}:`);
}

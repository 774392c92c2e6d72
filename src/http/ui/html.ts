/**
 * HTML by construction: every page is built with the `html` tag, which escapes every interpolated
 * value unless it is itself `Html` made by this tag (or `trusted`, for the few constant fragments
 * that are not templates). So a Run's tool name, a model name, a command, a pack name or a
 * capability principal can never become markup: it is text wherever it lands (element content or
 * a double-quoted attribute, the only two places pages interpolate). URLs are built from validated
 * ids or with `encodeURIComponent` (below, `url`), never from free text as a whole. Format
 * characters (bidi overrides, zero-width) are shown as `[U+XXXX]` (visibleText).
 */
import { visibleText } from '../../visible.ts';

export class Html {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  toString(): string {
    return this.#value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text as HTML text (element content, or a quoted attribute value). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.toString();
  if (Array.isArray(v)) return v.map(render).join('');
  // Format characters (bidi overrides, zero-width) shown as [U+XXXX]: a name never reads as another.
  return escapeHtml(visibleText(String(v)));
}

/** The template tag: constant parts as written, every value escaped (arrays concatenated). */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** A constant fragment that is not a template (never pass data through this). */
export function trusted(fragment: string): Html {
  return new Html(fragment);
}

/**
 * A path with query parameters: the path is a constant or built from validated ids, each query
 * value is percent-encoded. Escaped again by `html` when interpolated (& → &amp;), as it must be.
 */
export function url(path: string, query: Record<string, string | undefined> = {}): string {
  const q = Object.entries(query)
    .filter((e): e is [string, string] => e[1] !== undefined && e[1] !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  return q === '' ? path : `${path}?${q}`;
}

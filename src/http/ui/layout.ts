import { ICON_SVG, SCRIPT, STYLESHEET } from './assets.ts';
import { html, type Html } from './html.ts';
import { CSRF_FIELD } from './session.ts';

/** Who is looking at a page, and the CSRF token of their credential (for the page's forms). */
export interface Viewer {
  readonly username: string;
  /** `session`: signed in on the sign-in page (can sign out); `bearer`: a proxy's header. */
  readonly via: 'bearer' | 'session';
  readonly csrf: string;
}

/**
 * Headers of every UI response. The policy allows scripts, styles, images and fetches from the
 * sidecar only, no inline script or style (none is needed: no `style=`, no script bodies), forms
 * posting back here only, no framing; pages are never cached (they hold tenants' data).
 */
export const UI_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  // same-origin, not no-referrer: with no-referrer browsers send `Origin: null` on a form POST, which
  // the forms' origin check (routes.ts) must refuse.
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** The hidden CSRF field of a form. */
export function csrfField(token: string): Html {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${token}" />`;
}

export function page(title: string, viewer: Viewer | undefined, body: Html): string {
  const who =
    viewer === undefined
      ? html``
      : html`<div class="who">
          <span>Signed in as <strong>${viewer.username}</strong></span
          >${
            viewer.via === 'session'
              ? html`<form method="post" action="/ui/sign-out">
                  ${csrfField(viewer.csrf)}<button type="submit">Sign out</button>
                </form>`
              : html`<span class="muted">(through your proxy)</span>`
          }
        </div>`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · aibom-vault</title>
        <link rel="icon" href="${ICON_SVG.path}" type="image/svg+xml" />
        <link rel="stylesheet" href="${STYLESHEET.path}" />
        <script type="module" src="${SCRIPT.path}"></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <a class="brand" href="/ui/runs">aibom-vault</a>
          <nav aria-label="Main"><a href="/ui/runs">Runs</a></nav>
          ${who}
        </header>
        <main id="main">${body}</main>
      </body>
    </html> `.toString();
}

/** `3m`, `5h`, `2d` since `iso`, for the Age column (the exact time is in the element's title). */
export function age(iso: string, now: Date = new Date()): Html {
  const s = Math.max(0, Math.floor((now.getTime() - new Date(iso).getTime()) / 1000));
  const text =
    s < 60
      ? `${s}s`
      : s < 3600
        ? `${Math.floor(s / 60)}m`
        : s < 86400
          ? `${Math.floor(s / 3600)}h`
          : `${Math.floor(s / 86400)}d`;
  return html`<time datetime="${iso}" title="${iso}">${text}</time>`;
}

/** A coloured state word (never colour alone: the word is the information). */
export function badge(text: string, tone: 'ok' | 'warn' | 'bad' | 'muted'): Html {
  return html`<span class="badge ${tone}">${text}</span>`;
}

/** First characters of a digest or id, the whole value in the title. */
export function short(value: string, n = 19): Html {
  return html`<code title="${value}">${value.length > n ? `${value.slice(0, n)}…` : value}</code>`;
}

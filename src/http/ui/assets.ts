import { createHash } from 'node:crypto';

/**
 * The UI's only assets (a stylesheet, a script, an icon), served by the sidecar itself (no CDN, nothing fetched elsewhere) under
 * content-hashed names, so they are cached for good and a new version is a new URL. They are
 * modules of the code base rather than files beside it: the build (tsc) and the image carry them
 * without a copy step. The Content-Security-Policy allows scripts and styles from the sidecar only,
 * and no inline script or style anywhere: the pages have no `style=` attribute and no `<script>`
 * body, and work without the script (it only enhances: docs/adr/0016-web-ui.md).
 */

const CSS = `
:root{--fg:#1b1f24;--muted:#4a535e;--bg:#fff;--panel:#f4f6f8;--line:#d0d7de;--accent:#0a5bb5;--ok:#116329;--warn:#7a4a00;--bad:#a40e26;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
*{box-sizing:border-box}
body{margin:0;line-height:1.45}
a{color:var(--accent)}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,textarea:focus-visible,summary:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
.skip{position:absolute;left:-999px}.skip:focus{left:8px;top:8px;background:#fff;padding:4px 8px;z-index:10}
header.top{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.25rem;background:#0d1b2a;color:#fff}
header.top a{color:#fff;text-decoration:none}header.top .brand{font-weight:700;font-size:1.05rem}
header.top nav{flex:1}header.top .who{font-size:.9rem;display:flex;gap:.75rem;align-items:center}
header.top form{margin:0}header.top button{background:transparent;color:#fff;border:1px solid #8ea3b8;border-radius:4px;padding:.2rem .6rem;cursor:pointer}
main{padding:1rem 1.25rem 3rem;max-width:1280px}
h1{font-size:1.45rem;margin:.3rem 0 1rem}h2{font-size:1.15rem;margin:1.6rem 0 .6rem}h3{font-size:1rem;margin:1rem 0 .4rem}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{background:var(--panel);font-weight:600}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em;overflow-wrap:anywhere}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:0 .45rem;border-radius:999px;font-size:.8rem;border:1px solid currentColor;white-space:nowrap}
.ok{color:var(--ok)}.warn{color:var(--warn)}.bad{color:var(--bad)}
form.filters{display:flex;flex-wrap:wrap;gap:.75rem;align-items:end;background:var(--panel);padding:.75rem;border-radius:6px;margin-bottom:1rem}
form.filters label{display:flex;flex-direction:column;font-size:.85rem;gap:.2rem}
input,select,textarea{font:inherit;padding:.3rem .4rem;border:1px solid #8c959f;border-radius:4px}
button,.button{font:inherit;padding:.35rem .8rem;border-radius:4px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;text-decoration:none;display:inline-block}
.button.secondary,button.secondary{background:#fff;color:var(--accent)}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:.75rem}
.card{border:1px solid var(--line);border-radius:6px;padding:.75rem;background:#fff}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .9rem;margin:0}dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;overflow-wrap:anywhere}
.dag{overflow-x:auto;border:1px solid var(--line);border-radius:6px;background:var(--panel);padding:.5rem}
.dag svg text{font-family:system-ui,sans-serif;font-size:13px;fill:#1b1f24}.dag svg text.phase{fill:#4a535e}.dag svg rect{fill:#fff;stroke:#57606a}.dag svg .edge{stroke:#57606a;stroke-width:1.5;fill:none}
.drawer{position:fixed;top:0;right:0;bottom:0;width:min(560px,100%);background:#fff;border-left:1px solid var(--line);box-shadow:-8px 0 24px rgba(0,0,0,.15);padding:1rem 1.25rem;overflow-y:auto;z-index:5}
.drawer .close{float:right}
.notice{white-space:pre-wrap;background:#fff8e6;border:1px solid #d4a72c;border-radius:6px;padding:.75rem;margin:.5rem 0}
dialog{max-width:640px;width:calc(100% - 2rem);border:1px solid var(--line);border-radius:8px;padding:1rem 1.25rem}
dialog::backdrop{background:rgba(13,27,42,.45)}
.signin{max-width:560px}.signin textarea{width:100%;min-height:8rem}
.error{border:1px solid var(--bad);color:var(--bad);border-radius:6px;padding:.6rem .8rem;background:#fff5f5}
.pager{margin-top:.75rem;display:flex;gap:1rem}
.chain{margin:0;padding-left:1.1rem}
`;

const JS = `
// Progressive enhancement only: every action also works without this script (plain links and forms).
const byId = (id) => document.getElementById(id);
// Select all attestations.
const all = byId('select-all');
if (all) {
  all.addEventListener('change', () => {
    for (const box of document.querySelectorAll('input[name="ids"]')) box.checked = all.checked;
  });
}
// The export dialog: opened in place (a modal <dialog>) with the ids ticked on the page, instead of
// the confirmation page the form would otherwise load.
const open = byId('export-open');
const dialog = byId('export-dialog');
if (open && dialog && typeof dialog.showModal === 'function') {
  open.addEventListener('click', (event) => {
    const ids = [...document.querySelectorAll('input[name="ids"]:checked')].map((b) => b.value);
    if (ids.length === 0) return; // the form answers with its own message
    event.preventDefault();
    const holder = byId('export-ids');
    holder.replaceChildren(...ids.map((id) => Object.assign(document.createElement('input'), { type: 'hidden', name: 'ids', value: id })));
    byId('export-count').textContent = String(ids.length);
    dialog.showModal();
  });
  byId('export-cancel')?.addEventListener('click', (event) => {
    event.preventDefault();
    dialog.close();
  });
  dialog.querySelector('form')?.addEventListener('submit', () => setTimeout(() => dialog.close(), 0));
}
// The artifact drawer: Escape closes it (its close link otherwise).
const drawer = document.querySelector('.drawer');
if (drawer) {
  drawer.focus();
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') document.querySelector('.drawer .close')?.click();
  });
}
`;

export interface Asset {
  readonly path: string;
  readonly type: string;
  readonly body: Buffer;
}

function asset(name: string, ext: string, type: string, text: string): Asset {
  const body = Buffer.from(text.trim() + '\n', 'utf8');
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  return { path: `/ui/assets/${name}.${hash}.${ext}`, type, body };
}

const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#0d1b2a"/><path d="M4 8.5l2.5 2.5L12 5" stroke="#fff" stroke-width="2" fill="none"/></svg>`;

export const STYLESHEET = asset('ui', 'css', 'text/css; charset=utf-8', CSS);
export const ICON_SVG = asset('icon', 'svg', 'image/svg+xml', ICON);
export const SCRIPT = asset('ui', 'js', 'text/javascript; charset=utf-8', JS);
export const ASSETS: readonly Asset[] = [STYLESHEET, SCRIPT, ICON_SVG];

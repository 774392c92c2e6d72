import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Authorizer } from '../auth/authorizer.ts';
import type { ExportDeps } from '../../export/service.ts';
import type { PageBudget } from './budget.ts';
import { UI_HEADERS, type Viewer } from './layout.ts';
import type { SessionCodec } from './session.ts';
import type { VerificationCache } from './verify.ts';

/** What the UI's routes (routes.ts: sign-in and the shell; page-routes.ts: the pages) share. */

export interface UiDeps {
  readonly authorizer: Authorizer;
  readonly sessions: SessionCodec;
  /** Where sign-out records the session it ends, for every replica (the vault). */
  readonly revocations: { revoke(sid: string, expiresAt: Date): Promise<void> };
  /** The export route's dependencies: the dialog's download is the same export. */
  readonly exports: ExportDeps;
}

export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
export const uuidParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: UUID.source } },
} as const;

export const uiConfig = { ui: true, problem: 'html' } as const;
export const publicConfig = { public: true, problem: 'html' } as const;

export type Form = URLSearchParams;

const FALLBACK_NEXT = '/ui/runs';
/** Any origin: `next` is resolved against it only to see what a browser would make of the path. */
const DUMMY_ORIGIN = 'http://next.invalid';

/** No `.` or `..` segment, and no empty one but the last (`/ui/runs/` is fine, `/ui//x` is not). */
const isNormalisedPath = (path: string): boolean =>
  path
    .slice(1)
    .split('/')
    .every((seg, i, all) => (seg !== '' || i === all.length - 1) && seg !== '.' && seg !== '..');

/**
 * Where to go after signing in: `next` if it is a normalised path of this UI, else /ui/runs. Never
 * another site (an open redirect, `//host`, `/\host`), never a path that leaves /ui/ once a browser
 * resolves it (`/ui/../v1/…`, `/ui/%2e%2e/…`): printable ASCII only (no spaces, controls or
 * characters a browser would normalise), no backslash, no empty, `.` or `..` segment, and the path
 * a browser resolves (WHATWG URL) is the path given, under /ui/.
 */
export function safeNext(next: string | null | undefined): string {
  if (typeof next !== 'string' || next.length > 2048) return FALLBACK_NEXT;
  if (!/^\/ui\/[\x21-\x7e]*$/.test(next) || next.includes('\\')) return FALLBACK_NEXT;
  const path = next.split(/[?#]/, 1)[0]!;
  if (!isNormalisedPath(path)) return FALLBACK_NEXT;
  let resolved: URL;
  try {
    resolved = new URL(next, DUMMY_ORIGIN);
  } catch {
    return FALLBACK_NEXT;
  }
  return resolved.origin === DUMMY_ORIGIN &&
    resolved.pathname === path &&
    resolved.pathname.startsWith('/ui/')
    ? next
    : FALLBACK_NEXT;
}

/**
 * A state-changing request must come from this site's own pages: a browser's `Sec-Fetch-Site` and
 * `Origin`, when sent, must say so (defence in depth beside the CSRF token and SameSite=Strict).
 */
export function fromOwnPage(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

export function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).headers(UI_HEADERS).type('text/html; charset=utf-8').send(body);
}

export function toSignIn(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const next = req.method === 'GET' ? req.url : '/ui/runs';
  return reply
    .code(303)
    .header('cache-control', 'no-store')
    .redirect(`/ui/sign-in?next=${encodeURIComponent(safeNext(next))}`, 303);
}

/** What the page routes share: who is looking, /v1 calls as them, and the form check. */
export interface UiPage {
  readonly viewerOf: (req: FastifyRequest) => Viewer | undefined;
  readonly api: <T>(req: FastifyRequest, method: 'GET' | 'POST', url: string, body?: object) => Promise<T>;
  readonly checkForm: (req: FastifyRequest, form: Form) => void;
  /** Run and step pages in the making per caller (issue 28). */
  readonly pages: PageBudget;
  /** Results of record checks, shared by every page of this app. */
  readonly verifications: VerificationCache;
}

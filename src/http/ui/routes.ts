import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authorizer } from '../auth/authorizer.ts';
import { ProblemError, type ProblemCode } from '../problem.ts';
import { exportSelection, type ExportDeps } from '../../export/service.ts';
import { MAX_EXPORT_IDS } from '../routes/v1/export.ts';
import { ASSETS } from './assets.ts';
import { UI_HEADERS, type Viewer } from './layout.ts';
import { errorPage, signInPage } from './pages/misc.ts';
import { exportPage, runPage, type EnvelopeView, type RunView } from './pages/run.ts';
import { stepPage } from './pages/step.ts';
import { runsPage, type RunListView, type RunsFilter } from './pages/runs.ts';
import { visibleRun } from '../routes/v1/runs.ts';
import {
  bindingOf,
  cookie,
  CSRF_FIELD,
  MAX_SESSION_TOKEN,
  parseCookies,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  SIGNIN_COOKIE,
  SIGNIN_TTL_MS,
  type SessionCodec,
} from './session.ts';
import { PageBudget } from './budget.ts';
import { VerificationCache, verifyRecords } from './verify.ts';

/**
 * The web UI: server-rendered pages under /ui/ (docs/adr/0016-web-ui.md). Every page is built from
 * the /v1 answers the viewer would get with the same credential (the routes are called in-process
 * with `inject`, so the same authentication, SubjectAccessReviews, field allow-lists and errors
 * apply: nothing the API would withhold reaches a page). The only state-changing requests are the
 * sign-in, the sign-out and the export download; each checks the CSRF token of its form and the
 * request's origin.
 */
export interface UiDeps {
  readonly authorizer: Authorizer;
  readonly sessions: SessionCodec;
  /** Where sign-out records the session it ends, for every replica (the vault). */
  readonly revocations: { revoke(sid: string, expiresAt: Date): Promise<void> };
  /** The export route's dependencies: the dialog's download is the same export. */
  readonly exports: ExportDeps;
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const uuidParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: UUID.source } },
} as const;

const uiConfig = { ui: true, problem: 'html' } as const;
const publicConfig = { public: true, problem: 'html' } as const;

type Form = URLSearchParams;

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
function fromOwnPage(req: FastifyRequest): boolean {
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

function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).headers(UI_HEADERS).type('text/html; charset=utf-8').send(body);
}

function toSignIn(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const next = req.method === 'GET' ? req.url : '/ui/runs';
  return reply
    .code(303)
    .header('cache-control', 'no-store')
    .redirect(`/ui/sign-in?next=${encodeURIComponent(safeNext(next))}`, 303);
}

/**
 * Records per run page (issue 28: a page checks each of its records, milliseconds of CPU apiece;
 * the heaviest Run has 517). Further records are on the next pages (`?records=<cursor>`).
 */
export const RECORDS_PER_PAGE = 50;

interface RecordPage {
  readonly items: EnvelopeView[];
  readonly next_cursor: string | null;
}

export function uiRoutes(app: FastifyInstance, deps: UiDeps, done: (err?: Error) => void): void {
  const { sessions } = deps;
  const pages = new PageBudget();
  const verifications = new VerificationCache();
  // The UI's forms post application/x-www-form-urlencoded (only here: /v1 takes JSON only).
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 64 * 1024 },
    (_req, body, done) => done(null, new URLSearchParams(body as string)),
  );

  const viewerOf = (req: FastifyRequest): Viewer | undefined =>
    req.user !== undefined && req.credential !== undefined
      ? {
          username: req.user.username,
          via: req.credential.via,
          csrf: sessions.csrf(bindingOf(req.credential)),
        }
      : undefined;

  /** A /v1 call as the viewer (same credential, same reviews); a refusal becomes this page's error. */
  async function api<T>(req: FastifyRequest, method: 'GET' | 'POST', url: string, body?: object): Promise<T> {
    const res = await app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${req.credential!.token}`,
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    const json = res.json<unknown>();
    if (res.statusCode >= 400) {
      const p = json as { code?: string; detail?: string };
      throw new ProblemError(
        res.statusCode,
        (p.code ?? 'INTERNAL') as ProblemCode,
        p.detail ?? 'the API refused',
      );
    }
    return json as T;
  }

  const checkForm = (req: FastifyRequest, form: Form): void => {
    if (
      !fromOwnPage(req) ||
      !sessions.checkCsrf(bindingOf(req.credential!), form.get(CSRF_FIELD) ?? undefined)
    ) {
      throw new ProblemError(
        403,
        'CSRF_REJECTED',
        'the form was not sent from this site’s own page (CSRF token missing or invalid): reload the page and try again',
      );
    }
  };

  for (const path of ['/', '/ui']) {
    app.get(path, { config: { public: true }, schema: { hide: true } }, (_req, reply) =>
      reply.redirect('/ui/runs', 302),
    );
  }

  for (const asset of ASSETS) {
    app.get(asset.path, { config: { public: true }, schema: { hide: true } }, (_req, reply) =>
      reply
        .type(asset.type)
        .header('cache-control', 'public, max-age=31536000, immutable')
        .header('x-content-type-options', 'nosniff')
        .send(asset.body),
    );
  }

  sessionRoutes(app, deps, checkForm);
  pageRoutes(app, deps, { viewerOf, api, checkForm, pages, verifications });

  // Anything else under /ui/: an HTML 404, not problem+json.
  app.get('/ui/*', { config: publicConfig, schema: { hide: true } }, (_req, reply) =>
    html(
      reply,
      404,
      errorPage(undefined, {
        status: 404,
        code: 'NOT_FOUND',
        title: 'Not found',
        detail: 'There is no such page.',
      }),
    ),
  );
  done();
}

/** What the page routes share: who is looking, /v1 calls as them, and the form check. */
interface UiPage {
  readonly viewerOf: (req: FastifyRequest) => Viewer | undefined;
  readonly api: <T>(req: FastifyRequest, method: 'GET' | 'POST', url: string, body?: object) => Promise<T>;
  readonly checkForm: (req: FastifyRequest, form: Form) => void;
  /** Run and step pages in the making per caller (issue 28). */
  readonly pages: PageBudget;
  /** Results of record checks, shared by every page of this app. */
  readonly verifications: VerificationCache;
}

/** Sign-in (the token form, a session cookie) and sign-out. */
function sessionRoutes(app: FastifyInstance, deps: UiDeps, checkForm: UiPage['checkForm']): void {
  const { sessions } = deps;
  app.get<{ Querystring: { next?: string } }>(
    '/ui/sign-in',
    { config: publicConfig, schema: { hide: true } },
    (req, reply) => {
      const nonce = randomBytes(16).toString('base64url');
      reply.header('set-cookie', cookie(SIGNIN_COOKIE, nonce, SIGNIN_TTL_MS));
      return html(
        reply,
        200,
        signInPage({ csrf: sessions.csrf(`signin:${nonce}`), next: safeNext(req.query.next) }),
      );
    },
  );

  app.post<{ Body: Form }>(
    '/ui/sign-in',
    { config: publicConfig, schema: { hide: true } },
    async (req, reply) => {
      const form = req.body instanceof URLSearchParams ? req.body : new URLSearchParams();
      const next = safeNext(form.get('next'));
      const nonce = parseCookies(req.headers.cookie).get(SIGNIN_COOKIE);
      const again = (status: number, error: string) => {
        const fresh = randomBytes(16).toString('base64url');
        reply.header('set-cookie', cookie(SIGNIN_COOKIE, fresh, SIGNIN_TTL_MS));
        return html(reply, status, signInPage({ csrf: sessions.csrf(`signin:${fresh}`), next, error }));
      };
      if (
        nonce === undefined ||
        !fromOwnPage(req) ||
        !sessions.checkCsrf(`signin:${nonce}`, form.get(CSRF_FIELD) ?? undefined)
      ) {
        return again(
          403,
          'The sign-in form expired or was not sent from this site (CSRF check failed). Paste the token again.',
        );
      }
      const token = (form.get('token') ?? '').trim();
      if (token === '' || /\s/.test(token)) return again(400, 'Paste one token, without spaces.');
      if (token.length > MAX_SESSION_TOKEN) {
        return again(
          400,
          `This token is longer than ${MAX_SESSION_TOKEN} characters, too long to keep in a cookie: sign in through an authenticating proxy instead.`,
        );
      }
      let user;
      try {
        user = await deps.authorizer.authenticate(token);
      } catch (err) {
        throw new ProblemError(
          503,
          'UPSTREAM_UNAVAILABLE',
          'the Kubernetes API server could not review the token; try again',
          {
            headers: { 'retry-after': '5' },
            cause: err,
          },
        );
      }
      if (user === null) return again(401, 'The Kubernetes API server did not accept this token.');
      const { cookie: sealed } = sessions.seal(token);
      void reply.header('set-cookie', [
        cookie(SESSION_COOKIE, sealed, SESSION_TTL_MS),
        cookie(SIGNIN_COOKIE, '', 0),
      ]);
      return reply.header('cache-control', 'no-store').redirect(next, 303);
    },
  );

  app.post<{ Body: Form }>(
    '/ui/sign-out',
    { config: uiConfig, schema: { hide: true } },
    async (req, reply) => {
      if (req.credential === undefined) return toSignIn(req, reply);
      checkForm(req, req.body instanceof URLSearchParams ? req.body : new URLSearchParams());
      // Ended on the server, not only in this browser: a copy of the cookie is refused from now on,
      // by every replica (the UI and /v1 alike). Recorded before the answer; a failure is a 503 and
      // the browser keeps its cookie (the user sees that signing out did not happen).
      const { sid, exp } = req.credential;
      if (sid !== undefined && exp !== undefined) {
        try {
          await deps.revocations.revoke(sid, new Date(exp));
        } catch (err) {
          throw new ProblemError(
            503,
            'UPSTREAM_UNAVAILABLE',
            'signing out could not be recorded; try again',
            {
              headers: { 'retry-after': '5' },
              cause: err,
            },
          );
        }
      }
      return reply
        .header('set-cookie', cookie(SESSION_COOKIE, '', 0))
        .header('cache-control', 'no-store')
        .redirect('/ui/sign-in', 303);
    },
  );
}

/** The run list, a run's page, its verification and its export dialog. */
function pageRoutes(
  app: FastifyInstance,
  deps: UiDeps,
  { viewerOf, api, checkForm, pages, verifications }: UiPage,
): void {
  app.get<{ Querystring: RunsFilter }>(
    '/ui/runs',
    {
      config: uiConfig,
      schema: {
        hide: true,
        querystring: {
          type: 'object',
          properties: {
            namespace: { type: 'string', maxLength: 2048 },
            phase: { type: 'string', maxLength: 16 },
            name_prefix: { type: 'string', maxLength: 253 },
            cursor: { type: 'string', maxLength: 2048 },
          },
        },
      },
    },
    async (req, reply) => {
      const viewer = viewerOf(req);
      if (viewer === undefined) return toSignIn(req, reply);
      const f: RunsFilter = {
        ...(req.query.namespace?.trim() ? { namespace: req.query.namespace.replace(/\s+/g, '') } : {}),
        ...(req.query.phase ? { phase: req.query.phase } : {}),
        ...(req.query.name_prefix ? { name_prefix: req.query.name_prefix } : {}),
        ...(req.query.cursor ? { cursor: req.query.cursor } : {}),
      };
      const q = new URLSearchParams(Object.entries(f) as [string, string][]);
      try {
        const list = await api<RunListView>(req, 'GET', `/v1/runs${q.size > 0 ? `?${q.toString()}` : ''}`);
        return html(reply, 200, runsPage(viewer, f, list));
      } catch (err) {
        // A caller without a cluster-wide grant, in a cluster with more than 16 namespaces holding
        // runs, must name the namespaces (bounded review cost): ask for them on the page itself.
        if (!(f.namespace === undefined && err instanceof ProblemError && err.code === 'VALIDATION_FAILED')) {
          throw err;
        }
        const empty: RunListView = { items: [], next_cursor: null, excluded_namespace_count: 0 };
        return html(reply, 200, runsPage(viewer, f, empty, new Date(), err.message));
      }
    },
  );

  app.get<{ Params: { id: string }; Querystring: { drawer?: string; records?: string; steps?: string } }>(
    '/ui/runs/:id',
    {
      config: uiConfig,
      schema: {
        hide: true,
        params: uuidParams,
        querystring: {
          type: 'object',
          properties: {
            drawer: { type: 'string', maxLength: 32 },
            records: { type: 'string', maxLength: 2048 },
            steps: { type: 'string', pattern: '^[0-9]{1,3}$' },
          },
        },
      },
    },
    async (req, reply) => {
      const viewer = viewerOf(req);
      if (viewer === undefined) return toSignIn(req, reply);
      const release = pages.acquire(req.user!.username);
      try {
        const run = await api<RunView>(req, 'GET', `/v1/runs/${req.params.id}`);
        // One page of the run's records (`records` is the query's cursor) and the keys that verify
        // them. Capability chains as attested are on each step's own page (stepPage).
        const [page, keys] = await Promise.all([
          api<RecordPage>(req, 'POST', '/v1/attestations/query', {
            run_id: run.id,
            namespaces: [run.namespace],
            limit: RECORDS_PER_PAGE,
            ...(req.query.records !== undefined ? { cursor: req.query.records } : {}),
          }),
          // The run's own tenant only (contract: the key route's reviews stay at most two).
          api<unknown>(req, 'GET', `/v1/keys?namespace=${encodeURIComponent(run.namespace)}`),
        ]);
        const states = await verifyRecords(
          page.items as unknown as Record<string, unknown>[],
          keys,
          verifications,
        );
        const attestations = page.items.map((r, i) => ({ ...r, verification: states[i]! }));
        // Own keys only: `in` also finds inherited ones (`constructor`, `__proto__`, `toString`).
        const drawer =
          req.query.drawer !== undefined && Object.hasOwn(run.artifacts, req.query.drawer)
            ? req.query.drawer
            : undefined;
        return html(
          reply,
          200,
          runPage({
            viewer,
            run,
            attestations,
            ...(req.query.steps !== undefined ? { stepsPage: Number(req.query.steps) } : {}),
            records: {
              ...(req.query.records !== undefined ? { cursor: req.query.records } : {}),
              next: page.next_cursor,
            },
            ...(drawer !== undefined ? { drawer } : {}),
          }),
        );
      } finally {
        release();
      }
    },
  );

  app.get<{ Params: { id: string; step: string } }>(
    '/ui/runs/:id/steps/:step',
    {
      config: uiConfig,
      schema: {
        hide: true,
        params: {
          type: 'object',
          required: ['id', 'step'],
          properties: {
            id: { type: 'string', pattern: UUID.source },
            step: { type: 'string', minLength: 1, maxLength: 63 },
          },
        },
      },
    },
    async (req, reply) => {
      const viewer = viewerOf(req);
      if (viewer === undefined) return toSignIn(req, reply);
      const release = pages.acquire(req.user!.username);
      try {
        const run = await api<RunView>(req, 'GET', `/v1/runs/${req.params.id}`);
        const known = run.spec.steps.some((s) => s.id === req.params.step);
        const [found, keys] = known
          ? await Promise.all([
              api<RecordPage>(req, 'POST', '/v1/attestations/query', {
                run_id: run.id,
                namespaces: [run.namespace],
                step_id: req.params.step,
                kind: 'step',
                limit: 1,
              }),
              // The run's own tenant only (contract: the key route's reviews stay at most two).
              api<unknown>(req, 'GET', `/v1/keys?namespace=${encodeURIComponent(run.namespace)}`),
            ])
          : [{ items: [], next_cursor: null }, undefined];
        const record = found.items[0];
        const [verification] =
          record !== undefined
            ? await verifyRecords([record as unknown as Record<string, unknown>], keys, verifications)
            : [];
        return html(
          reply,
          known ? 200 : 404,
          stepPage({
            viewer,
            run,
            stepId: req.params.step,
            ...(record !== undefined && verification !== undefined
              ? { record: { ...record, verification } }
              : {}),
          }),
        );
      } finally {
        release();
      }
    },
  );

  app.get<{ Params: { id: string }; Querystring: { ids?: string | string[] } }>(
    '/ui/runs/:id/export',
    { config: uiConfig, schema: { hide: true, params: uuidParams } },
    async (req, reply) => {
      const viewer = viewerOf(req);
      if (viewer === undefined) return toSignIn(req, reply);
      const run = await api<RunView>(req, 'GET', `/v1/runs/${req.params.id}`);
      const raw = req.query.ids;
      const ids = (Array.isArray(raw) ? raw : raw !== undefined ? [raw] : []).filter((id) => UUID.test(id));
      return html(reply, ids.length === 0 ? 400 : 200, exportPage(viewer, run, ids.slice(0, MAX_EXPORT_IDS)));
    },
  );

  app.post<{ Body: Form }>('/ui/export', { config: uiConfig, schema: { hide: true } }, async (req, reply) => {
    if (req.credential === undefined || req.user === undefined) return toSignIn(req, reply);
    const form = req.body instanceof URLSearchParams ? req.body : new URLSearchParams();
    checkForm(req, form);
    const runId = form.get('run') ?? '';
    const ids = form.getAll('ids');
    if (
      !UUID.test(runId) ||
      ids.length === 0 ||
      ids.length > MAX_EXPORT_IDS ||
      !ids.every((id) => UUID.test(id))
    ) {
      throw new ProblemError(
        400,
        'VALIDATION_FAILED',
        `select 1 to ${MAX_EXPORT_IDS} attestations of one run to export`,
      );
    }
    if (form.get('ack') !== 'yes') {
      throw new ProblemError(
        400,
        'VALIDATION_FAILED',
        'confirm that you have read the retention notice before the download',
      );
    }
    // The run decides the namespace (and the caller must be allowed to get it: the same reviews and
    // 404/403 as GET /v1/runs/{id}, without building the run's detail); the ids must lie in it, as
    // the export route checks.
    const run = await visibleRun(deps.exports, req, runId);
    return exportSelection(deps.exports, req, reply, { ids: [...new Set(ids)], namespaces: [run.namespace] });
  });
}

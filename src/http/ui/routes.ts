import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ProblemError, upstreamUnavailable, type ProblemCode } from '../problem.ts';
import { ASSETS } from './assets.ts';
import { PageBudget } from './budget.ts';
import {
  fromOwnPage,
  html,
  publicConfig,
  safeNext,
  toSignIn,
  uiConfig,
  type Form,
  type UiDeps,
  type UiPage,
} from './common.ts';
import type { Viewer } from './layout.ts';
import { pageRoutes } from './page-routes.ts';
import { errorPage, signInPage } from './pages/misc.ts';
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
} from './session.ts';
import { VerificationCache } from './verify.ts';

export { safeNext } from './common.ts';

/**
 * The web UI: server-rendered pages under /ui/ (docs/adr/0016-web-ui.md). Every page is built from
 * the /v1 answers the viewer would get with the same credential (the routes are called in-process
 * with `inject`, so the same authentication, SubjectAccessReviews, field allow-lists and errors
 * apply: nothing the API would withhold reaches a page). The only state-changing requests are the
 * sign-in, the sign-out and the export download; each checks the CSRF token of its form and the
 * request's origin.
 */
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
  app.get(
    '/ui/*',
    { config: { ...publicConfig, notFoundPage: true }, schema: { hide: true } },
    (_req, reply) =>
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
        throw upstreamUnavailable('the Kubernetes API server could not review the token; try again', err);
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
          throw upstreamUnavailable('signing out could not be recorded; try again', err);
        }
      }
      return reply
        .header('set-cookie', cookie(SESSION_COOKIE, '', 0))
        .header('cache-control', 'no-store')
        .redirect('/ui/sign-in', 303);
    },
  );
}

import type { FastifyInstance } from 'fastify';
import { ProblemError } from '../problem.ts';
import { exportSelection } from '../../export/service.ts';
import { MAX_EXPORT_IDS } from '../routes/v1/export.ts';
import { visibleRun } from '../routes/v1/runs.ts';
import { html, toSignIn, uiConfig, UUID, uuidParams, type Form, type UiDeps, type UiPage } from './common.ts';
import { exportPage, runPage, type EnvelopeView, type RunView } from './pages/run.ts';
import { runsPage, type RunListView, type RunsFilter } from './pages/runs.ts';
import { stepPage } from './pages/step.ts';
import { verifyRecords } from './verify.ts';

/**
 * Records per run page (issue 28: a page checks each of its records, milliseconds of CPU apiece;
 * the heaviest Run has 517). Further records are on the next pages (`?records=<cursor>`).
 */
export const RECORDS_PER_PAGE = 50;

interface RecordPage {
  readonly items: EnvelopeView[];
  readonly next_cursor: string | null;
}

/** The run list, a run's page, its verification and its export dialog. */
export function pageRoutes(app: FastifyInstance, deps: UiDeps, ui: UiPage): void {
  runListRoute(app, ui);
  runPageRoute(app, ui);
  stepPageRoute(app, ui);
  exportRoutes(app, deps, ui);
}

/** The run list, filtered by namespace, phase and name prefix, a page at a time. */
function runListRoute(app: FastifyInstance, { viewerOf, api }: UiPage): void {
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
}

/** A run's page: its steps, one page of its records (each verified) and an artifact drawer. */
function runPageRoute(app: FastifyInstance, { viewerOf, api, pages, verifications }: UiPage): void {
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
}

/** A step's page: its signed record (verified) and what the run's spec says of it. */
function stepPageRoute(app: FastifyInstance, { viewerOf, api, pages, verifications }: UiPage): void {
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
}

/** The export dialog of a run's selected records, and its download (the export route's bundle). */
function exportRoutes(app: FastifyInstance, deps: UiDeps, { viewerOf, api, checkForm }: UiPage): void {
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

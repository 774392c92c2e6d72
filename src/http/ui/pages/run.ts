import type { RunSpec, StepSpec, StepStatus } from '../../../crd/run.ts';
import { parseRetention, retainUntil, type RunPolicyPack } from '../../../policy/index.ts';
import { html, type Html } from '../html.ts';
import { age, badge, csrfField, page, short, type Viewer } from '../layout.ts';
import type { VerificationState } from '../verify.ts';
import { phaseBadge } from './runs.ts';

/** GET /v1/runs/{id}, as the page reads it. */
export interface RunView {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly phase: string | null;
  readonly spec: RunSpec;
  readonly steps: readonly StepStatus[];
  readonly artifacts: Readonly<Record<string, Record<string, unknown>>>;
  readonly policy_pack: RunPolicyPack;
  readonly created_at?: string;
}

/** One envelope of POST /v1/attestations/query, as the page reads it. */
export interface EnvelopeView {
  readonly id: string;
  readonly kind: string;
  readonly step_id: string | null;
  readonly created_at: string;
  readonly digest: string;
  readonly signature: { algorithm: string; key_id: string; cert_chain_ref: string | null };
  readonly capability_chain: readonly ChainView[] | null;
  readonly transparency: Record<string, unknown> | null;
}

export interface ChainView {
  capability: string;
  scope: string | null;
  root: { authority: string; key_id: string } | null;
  links: { scope: string; granted_by: string; approved_by: string | null }[];
}

export interface RunPageInput {
  readonly viewer: Viewer;
  readonly run: RunView;
  /** One page of the run's records (src/http/ui/page-routes.ts RECORDS_PER_PAGE), each checked. */
  readonly attestations: readonly (EnvelopeView & { verification: VerificationState })[];
  /** Where this page of records is: its cursor (none: the first page) and the next page's. */
  readonly records?: { readonly cursor?: string; readonly next: string | null };
  /** Which page of the steps table ({@link STEPS_PER_PAGE} steps each, spec order), from 0. */
  readonly stepsPage?: number;
  /** Which artifact's drawer is open (`?drawer=aibom`). */
  readonly drawer?: string;
  readonly now?: Date;
}

// ------------------------------------------------------------------------------------------------
// The step DAG: columns by depth (a step one column right of the deepest step it depends on; spec
// order lists every step after its dependencies, so one pass suffices), edges dependency → step.

const NODE_W = 190;
const NODE_H = 62;
const COL = 240;
const ROW = 78;

/**
 * Most dependencies the DAG draws as arrows (issue 28: the heaviest Run has 128 steps of 32
 * dependencies, 3,568 arrows, half a megabyte of SVG nobody can read). Beyond it the graph shows
 * its steps by depth only, and the steps table lists each step's dependencies.
 */
export const MAX_DAG_EDGES = 256;
/** Steps per page of the steps table (spec order; `?steps=N` is page N, from 0). */
export const STEPS_PER_PAGE = 32;

function dag(spec: RunSpec, status: ReadonlyMap<string, StepStatus>): Html {
  const level = new Map<string, number>();
  const rowOf = new Map<string, number>();
  const perLevel: number[] = [];
  for (const step of spec.steps) {
    const l = Math.max(-1, ...(step.dependsOn ?? []).map((d) => level.get(d) ?? 0)) + 1;
    level.set(step.id, l);
    rowOf.set(step.id, perLevel[l] ?? 0);
    perLevel[l] = (perLevel[l] ?? 0) + 1;
  }
  const pos = (id: string) => ({ x: 10 + (level.get(id) ?? 0) * COL, y: 10 + (rowOf.get(id) ?? 0) * ROW });
  const width = 20 + Math.max(1, perLevel.length) * COL - (COL - NODE_W);
  const height = 20 + Math.max(1, ...perLevel) * ROW - (ROW - NODE_H);
  const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
  const edgeCount = spec.steps.reduce((n, s) => n + (s.dependsOn?.length ?? 0), 0);
  const drawn = edgeCount <= MAX_DAG_EDGES;
  const edges = (drawn ? spec.steps : []).flatMap((step) =>
    (step.dependsOn ?? []).map((dep) => {
      const a = pos(dep);
      const b = pos(step.id);
      return html`<path
        class="edge"
        marker-end="url(#arrow)"
        d="M${a.x + NODE_W},${a.y + NODE_H / 2} C${a.x + NODE_W + 25},${a.y + NODE_H / 2} ${b.x - 25},${b.y + NODE_H / 2} ${b.x - 6},${b.y + NODE_H / 2}"
      />`;
    }),
  );
  const nodes = spec.steps.map((step) => {
    const p = pos(step.id);
    const what = step.model ? `model: ${step.model.name}` : `tool: ${step.tool?.name ?? '?'}`;
    const phase = status.get(step.id)?.phase ?? 'Pending';
    return html`<g
      ><title>${step.id} (${what}, ${phase})</title
      ><rect x="${p.x}" y="${p.y}" width="${NODE_W}" height="${NODE_H}" rx="6" /><text
        x="${p.x + 10}"
        y="${p.y + 19}"
        font-weight="600"
        >${cut(step.id, 24)}</text
      ><text x="${p.x + 10}" y="${p.y + 37}">${cut(what, 26)}</text
      ><text x="${p.x + 10}" y="${p.y + 54}" class="phase">${phase}</text></g
    >`;
  });
  return html`<div class="dag">
    <svg
      role="img"
      aria-label="${
        drawn
          ? `Step graph: ${spec.steps.length} steps; each arrow goes from a step to a step that depends on it`
          : `Step graph: ${spec.steps.length} steps by depth; their ${edgeCount} dependencies are listed in the steps table`
      }"
      width="${width}"
      height="${height}"
      viewBox="0 0 ${width} ${height}"
      xmlns="http://www.w3.org/2000/svg"
    >
      <defs>
        <marker
          id="arrow"
          viewBox="0 0 8 8"
          refX="7"
          refY="4"
          markerWidth="8"
          markerHeight="8"
          orient="auto-start-reverse"
        >
          <path d="M0,0 L8,4 L0,8 z" />
        </marker>
      </defs>
      ${edges}${nodes}
    </svg>
    ${
      drawn
        ? ''
        : html`<p class="muted">
            ${edgeCount} dependencies: too many arrows to draw; each step's are in the steps table.
          </p>`
    }
  </div>`;
}

export function modelOrTool(step: StepSpec): Html {
  if (step.model) {
    const m = step.model;
    return html`<strong>model</strong> ${m.name}
      <span class="muted"
        >(${m.provider}, version
        ${m.version}${m.temperature !== undefined ? `, temperature ${m.temperature}` : ''})</span
      >`;
  }
  const t = step.tool;
  return html`<strong>tool</strong> ${t?.name ?? '?'}${
      t?.command !== undefined && t.command.length > 0
        ? html`<br /><code
              >${t.command.map((a) => (/[\s"'\\]/.test(a) || a === '' ? JSON.stringify(a) : a)).join(' ')}</code
            >`
        : ''
    }`;
}

export function chainList(chains: readonly ChainView[]): Html {
  if (chains.length === 0) return html`<span class="muted">none</span>`;
  return html`${chains.map(
    (c) =>
      html`<div>
        <strong>${c.scope ?? '?'}</strong>${
          c.root !== null
            ? html` <span class="muted">(root: ${c.root.authority} key ${short(c.root.key_id, 14)})</span>`
            : ''
        }
        <ol class="chain">
          ${c.links.map(
            (l) =>
              html`<li>
                <code>${l.scope}</code> granted by <code>${l.granted_by}</code>${
                  l.approved_by !== null
                    ? html`, approved by <code>${l.approved_by}</code>`
                    : html`, <span class="muted">no approval</span>`
                }
              </li>`,
          )}
        </ol>
      </div>`,
  )}`;
}

/**
 * The chain as the spec declares it. The chain as attested (with its root authority and key) is
 * on the step's own page, loaded when asked for: a step record carries a token per capability, and
 * the run page does not fetch 128 of them (issue 28).
 */
function declaredChain(run: RunView, step: StepSpec, finished: boolean): Html {
  const caps = step.capabilities;
  if (caps === undefined || caps.length === 0) return html`<span class="muted">none</span>`;
  const attested = html`<a href="${`/ui/runs/${run.id}/steps/${encodeURIComponent(step.id)}`}"
    >as attested</a
  >`;
  return html`<span class="muted"
      >${finished ? html`declared (${attested}):` : 'declared, not attested yet:'}</span
    >${caps.map(
      (c) =>
        html`<div>
          <strong>${c.scope}</strong>
          <ol class="chain">
            ${[...(c.delegatedFrom ?? []), c].map(
              (l) =>
                html`<li>
                  <code>${l.scope}</code> granted by <code>${l.grantedBy}</code>${
                    l.approvedBy !== undefined ? html`, approved by <code>${l.approvedBy}</code>` : ''
                  }
                </li>`,
            )}
          </ol>
        </div>`,
    )}`;
}

export function stepError(s: StepStatus | undefined): Html {
  // The run detail gives the final step's error as `{message, artifacts}` (it references the BOM).
  const error: unknown = s?.error;
  const message =
    typeof error === 'string'
      ? error
      : typeof error === 'object' &&
          error !== null &&
          typeof (error as { message?: unknown }).message === 'string'
        ? (error as { message: string }).message
        : undefined;
  if (message === undefined) return html``;
  const text = message.length > 300 ? `${message.slice(0, 300)}…` : message;
  return html`<br /><span class="bad">${text}</span>`;
}

/** Links to the other pages of the steps table. */
function stepsNav(run: RunView, page: number, pages: number): Html {
  if (pages <= 1) return html``;
  const href = (n: number) => `/ui/runs/${run.id}${n > 0 ? `?steps=${n}` : ''}#dag-title`;
  return html`<nav class="steps-nav" aria-label="Pages of steps">
    <span class="muted"
      >steps ${page * STEPS_PER_PAGE + 1}–${Math.min((page + 1) * STEPS_PER_PAGE, run.spec.steps.length)} of
      ${run.spec.steps.length}</span
    >${Array.from({ length: pages }, (_, n) =>
      n === page ? html` · <strong>${n + 1}</strong>` : html` · <a href="${href(n)}">${n + 1}</a>`,
    )}
  </nav>`;
}

function stepsTable(run: RunView, page: number): Html {
  const status = new Map(run.steps.map((s) => [s.id, s]));
  const pages = Math.max(1, Math.ceil(run.spec.steps.length / STEPS_PER_PAGE));
  const at = Math.min(Math.max(0, page), pages - 1);
  const shown = run.spec.steps.slice(at * STEPS_PER_PAGE, (at + 1) * STEPS_PER_PAGE);
  return html`${stepsNav(run, at, pages)}
    <table>
      <caption class="muted">
        Steps in spec order; capability chains as declared, and as attested in each finished step's record
      </caption>
      <thead>
        <tr>
          <th scope="col">Step</th>
          <th scope="col">Model or tool</th>
          <th scope="col">Depends on</th>
          <th scope="col">Phase</th>
          <th scope="col">Capability chain</th>
        </tr>
      </thead>
      <tbody>
        ${shown.map((step) => {
          const st = status.get(step.id);
          return html`<tr>
            <th scope="row"><code>${step.id}</code></th>
            <td>${modelOrTool(step)}</td>
            <td>
              ${
                (step.dependsOn ?? []).length > 0
                  ? html`${(step.dependsOn ?? []).map((d, i) => html`${i > 0 ? ', ' : ''}<code>${d}</code>`)}`
                  : html`<span class="muted">—</span>`
              }
            </td>
            <td>${phaseBadge(st?.phase ?? null)}${stepError(st)}</td>
            <td>${declaredChain(run, step, st?.phase === 'Succeeded' || st?.phase === 'Failed')}</td>
          </tr>`;
        })}
      </tbody>
    </table>`;
}

export function verificationCell(v: VerificationState): Html {
  if (v.state === 'verified') return html`${badge('signature valid', 'ok')}`;
  return html`${badge(v.state === 'unknown_key' ? 'signer unknown' : 'verification failed', 'bad')}
    <ul>
      ${v.problems.map((p) => html`<li>${p}</li>`)}
    </ul>`;
}

function receiptCell(t: Record<string, unknown> | null): Html {
  if (t === null) return html`<span class="muted">none</span>`;
  const status = typeof t.status === 'string' ? t.status : '?';
  // Queued after a failed attempt reads as a problem (the job says why and when it is tried next).
  const tone = status === 'published' ? 'ok' : typeof t.last_error === 'string' ? 'bad' : 'warn';
  const mode = t.mode === 'dry_run' ? 'dry run (own log)' : t.mode === 'published' ? 'remote log' : '';
  return html`${badge(status, tone)}
  ${mode}${
    t.log_index !== undefined
      ? html`<br /><span class="muted">log index</span>
          ${typeof t.log_index === 'number' ? t.log_index : '?'}`
      : ''
  }${typeof t.entry_id === 'string' ? html`<br /><span class="muted">entry</span> ${short(t.entry_id, 14)}` : ''}${
    typeof t.receipt === 'string'
      ? html`<br /><span class="muted">receipt</span> ${t.receipt.length} b64 chars`
      : ''
  }${status !== 'published' ? html`<br /><span class="muted">job</span> ${short(typeof t.job_id === 'string' ? t.job_id : '', 14)}` : ''}`;
}

/** Links to the first and the next page of records (a keyset cursor only goes forward). */
function recordsNav(run: RunView, shown: number, at: RunPageInput['records']): Html {
  if (at === undefined || (at.cursor === undefined && at.next === null)) return html``;
  const href = (cursor?: string) =>
    `/ui/runs/${run.id}${cursor !== undefined ? `?records=${encodeURIComponent(cursor)}` : ''}#att-title`;
  return html`<nav class="records-nav" aria-label="Pages of attestations">
    <span class="muted">${shown} attestation(s) on this page</span>
    ${at.cursor !== undefined ? html` · <a href="${href()}">First page</a>` : ''}
    ${at.next !== null ? html` · <a id="records-next" href="${href(at.next)}">Next page</a>` : ''}
  </nav>`;
}

function attestationsTable(
  run: RunView,
  records: RunPageInput['attestations'],
  at: RunPageInput['records'],
): Html {
  if (records.length === 0) return html`<p>No attestations recorded yet.</p>`;
  return html`${recordsNav(run, records.length, at)}
    <form method="get" action="${`/ui/runs/${run.id}/export`}" id="attestations">
      <table>
        <caption class="muted">
          Verified by this server against the trust bundle of
          <code>GET /v1/keys</code
          >; check independently with
          <code>service-ctl keys fetch --out trust</code>
          then
          <code>service-ctl verify ID --trust-bundle trust</code>
          (the same checks of each record, with the same verdict, then its capability chains; add
          <code>--log-keys trust/log-keys.cbor</code>
          for the receipt)
        </caption>
        <thead>
          <tr>
            <th scope="col">
              <input type="checkbox" id="select-all" aria-label="Select all attestations" />
            </th>
            <th scope="col">Kind</th>
            <th scope="col">Step</th>
            <th scope="col">Attestation</th>
            <th scope="col">Signature</th>
            <th scope="col">Verification</th>
            <th scope="col">Transparency receipt</th>
            <th scope="col">Recorded</th>
          </tr>
        </thead>
        <tbody>
          ${records.map(
            (r) =>
              html`<tr>
                <td>
                  <input
                    type="checkbox"
                    name="ids"
                    value="${r.id}"
                    aria-label="${`Select attestation ${r.id}`}"
                  />
                </td>
                <td>${r.kind}</td>
                <td>
                  ${r.step_id !== null ? html`<code>${r.step_id}</code>` : html`<span class="muted">—</span>`}
                </td>
                <td>${short(r.id, 13)}<br /><span class="muted">digest</span> ${short(r.digest, 15)}</td>
                <td>
                  ${r.signature.algorithm}<br /><span class="muted">key</span>
                  ${short(r.signature.key_id, 15)}${
                    r.signature.cert_chain_ref !== null
                      ? html`<br /><span class="muted">cert</span> ${short(r.signature.cert_chain_ref, 15)}`
                      : ''
                  }
                </td>
                <td>${verificationCell(r.verification)}</td>
                <td>${receiptCell(r.transparency)}</td>
                <td>${age(r.created_at)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
      <p><button type="submit" id="export-open">Export selected…</button></p>
    </form>`;
}

/** The pack section: the run's pack, the resource describing it, and how the run relates to it. */
function packSection(p: RunPolicyPack): Html {
  const r = p.resource;
  return html`<section aria-labelledby="pack-title">
    <h2 id="pack-title">Policy pack</h2>
    <dl class="kv">
      <dt>Pack</dt>
      <dd>
        <code>${p.name}@${p.version}</code> ${
          p.status === 'resolved'
            ? badge('described by PolicyPack', 'ok')
            : p.status === 'not_found'
              ? badge('no PolicyPack describes it', 'warn')
              : badge('PolicyPacks unavailable', 'bad')
        }
      </dd>
      ${
        r !== null
          ? html`<dt>Resource</dt>
              <dd>
                <code>${r.name}</code
                >${r.version === null ? html` <span class="muted">(every version of ${r.pack})</span>` : ''}${
                  r.conflicting.length > 0
                    ? html` <span class="warn">also claimed by ${r.conflicting.join(', ')}</span>`
                    : ''
                }
              </dd>
              ${
                r.description !== null
                  ? html`<dt>About</dt>
                      <dd>${r.description}</dd>`
                  : ''
              }
              <dt>Minimum retention</dt>
              <dd><strong>${r.minimum_retention_text}</strong> <code>${r.minimum_retention}</code></dd>
              <dt>Required guardrails</dt>
              <dd>
                ${r.guardrails.length > 0 ? r.guardrails.join(', ') : html`<span class="muted">none</span>`}
              </dd>`
          : ''
      }
      <dt>Declared by the run</dt>
      <dd>
        ${p.declared_guardrails.length > 0 ? p.declared_guardrails.join(', ') : html`<span class="muted">none</span>`}
      </dd>
      ${
        r !== null
          ? html`<dt>Missing</dt>
              <dd>
                ${
                  p.missing_guardrails.length > 0
                    ? html`<span class="warn">${p.missing_guardrails.join(', ')}</span>`
                    : html`<span class="ok">none: the run declares every guardrail the pack requires</span>`
                }
              </dd>`
          : ''
      }
    </dl>
  </section>`;
}

/**
 * What export rule 4 shows before anything leaves: the run's policy pack, its minimum retention
 * (and the date to keep a bundle made now until) and its retention notice; or why they cannot be
 * shown. The same on every export path of the UI: the selection dialog and the artifact drawer's
 * "Export with receipts".
 */
function retentionNotice(run: Pick<RunView, 'policy_pack'>, now: Date, idPrefix = ''): Html {
  const p = run.policy_pack;
  const r = p.resource;
  const retention = r !== null ? parseRetention(r.minimum_retention) : undefined;
  return html`${
    r !== null
      ? html`<p>
            Policy pack <code>${p.name}@${p.version}</code> requires a minimum retention of
            <strong>${r.minimum_retention_text}</strong> (<code>${r.minimum_retention}</code>)${
              retention !== undefined
                ? html`: keep this bundle until at least
                    <strong id="${`${idPrefix}retain-until`}">${retainUntil(now, retention)}</strong>`
                : ''
            }.
          </p>
          <h3>Retention notice</h3>
          <div class="notice" id="${`${idPrefix}retention-notice`}">${r.notice}</div>`
      : html`<p class="warn" id="${`${idPrefix}retention-notice`}">
          ${
            p.status === 'unavailable'
              ? `The policy packs could not be read just now, so the retention notice of ${p.name}@${p.version} cannot be shown. Try again shortly.`
              : `No PolicyPack describes ${p.name}@${p.version}: it defines no retention notice or minimum retention. Ask your cluster administrators before you share this bundle.`
          }
        </p>`
  }`;
}

/**
 * The export form: the pack's retention notice and minimum retention, then the download. Shared by
 * the dialog on the run page (opened by the script) and the confirmation page (without script).
 */
export function exportForm(
  run: Pick<RunView, 'id' | 'policy_pack'>,
  ids: readonly string[],
  csrf: string,
  now: Date = new Date(),
): Html {
  return html`<form method="post" action="/ui/export">
    <h2 id="export-title">
      Export <span id="export-count">${ids.length}</span> attestation(s) with receipts
    </h2>
    ${retentionNotice(run, now)} ${csrfField(csrf)}<input type="hidden" name="run" value="${run.id}" />
    <div id="export-ids">${ids.map((id) => html`<input type="hidden" name="ids" value="${id}" />`)}</div>
    <p>
      <label
        ><input type="checkbox" name="ack" value="yes" required /> I have read the retention notice and will
        keep the bundle as it requires</label
      >
    </p>
    <p>
      <button type="submit" id="export-download">Download bundle</button>
      <a class="button secondary" id="export-cancel" href="${`/ui/runs/${run.id}`}">Cancel</a>
    </p>
  </form>`;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
}

/** The drawer of one artifact: what it is, how it is signed, its C2PA manifest, the evidence download. */
function drawer(run: RunView, kind: string, now: Date): Html {
  // Own keys only: `kind` comes from the query string, and an inherited key is no artifact.
  const a = Object.hasOwn(run.artifacts, kind) ? run.artifacts[kind] : undefined;
  if (a === undefined) return html``;
  const sig = (a.signature ?? {}) as Record<string, unknown>;
  const sigTs = sig.timestamp as Record<string, unknown> | undefined;
  const m = (a.c2pa_manifest ?? {}) as Record<string, unknown>;
  const mTs = m.timestamp as Record<string, unknown> | undefined;
  const t = (a.transparency ?? null) as Record<string, unknown> | null;
  const history = Array.isArray(a.c2pa_manifest_history) ? a.c2pa_manifest_history.length : 0;
  const base = `/v1/runs/${run.id}/artifacts/${kind}`;
  return html`<aside
    class="drawer"
    role="dialog"
    aria-modal="false"
    aria-labelledby="drawer-title"
    tabindex="-1"
  >
    <a class="close button secondary" href="${`/ui/runs/${run.id}`}">Close</a>
    <h2 id="drawer-title">${kind === 'aibom' ? 'AIBOM' : kind} of ${run.name}</h2>
    <form method="get" action="${`${base}/evidence`}" id="evidence-form">
      <h3>Export with receipts</h3>
      ${retentionNotice(run, now, 'evidence-')}
      <p>
        <label
          ><input type="checkbox" id="evidence-ack" required /> I have read the retention notice and will keep
          the bundle as it requires</label
        >
      </p>
      <p><button type="submit" id="export-with-receipts">Export with receipts</button></p>
    </form>
    <p class="muted">
      The evidence bundle: the ${kind === 'aibom' ? 'AIBOM' : kind}, its C2PA manifest and metadata, its
      attestation and the run's capability records with their transparency receipts: the bytes
      <code>service-ctl audit export --run ${run.id}</code> writes. Verify it with
      <code>service-ctl verify FILE --trust-anchor trust/ca.pem</code>.
    </p>
    <h3>Artifact</h3>
    <dl class="kv">
      <dt>Digest</dt>
      <dd><code>${str(a.digest)}</code></dd>
      <dt>Size</dt>
      <dd>${str(a.size)} bytes</dd>
      <dt>Media type</dt>
      <dd>${str(a.media_type)}</dd>
      <dt>Object</dt>
      <dd><code>${str(a.bucket)}/${str(a.key)}</code></dd>
      <dt>Attestation</dt>
      <dd><code>${str(a.aibom_attestation_id)}</code></dd>
      <dt>Downloads</dt>
      <dd><a href="${base}">${kind}.json</a> · <a href="${`${base}/manifest`}">C2PA manifest</a></dd>
    </dl>
    <h3>Signature</h3>
    <dl class="kv">
      <dt>Algorithm</dt>
      <dd>${str(sig.algorithm)}</dd>
      <dt>Key id</dt>
      <dd><code>${str(sig.key_id)}</code></dd>
      <dt>Certificate</dt>
      <dd><code>${str(sig.cert_chain_ref) || '—'}</code></dd>
      <dt>Signature</dt>
      <dd>${short(str(sig.signature), 32)}</dd>
      <dt>Time-stamp</dt>
      <dd>
        ${sigTs !== undefined ? html`${str(sigTs.time)} <span class="muted">by ${str(sigTs.tsa)}</span>` : html`<span class="muted">none</span>`}
      </dd>
    </dl>
    <h3>C2PA manifest</h3>
    <dl class="kv">
      <dt>Label</dt>
      <dd><code>${str(m.label)}</code></dd>
      <dt>Digest</dt>
      <dd><code>${str(m.digest)}</code></dd>
      <dt>Specification</dt>
      <dd>C2PA ${str(m.spec_version)}, claim version ${str(m.claim_version)}</dd>
      <dt>Attestations</dt>
      <dd>${Array.isArray(m.attestation_ids) ? m.attestation_ids.length : 0} linked</dd>
      <dt>Time-stamp</dt>
      <dd>
        ${mTs !== undefined ? html`${str(mTs.time)} <span class="muted">by ${str(mTs.tsa)}</span>` : html`<span class="muted">none</span>`}
      </dd>
      <dt>Replaced</dt>
      <dd>${history > 0 ? `${history} earlier manifest(s) (repairs)` : 'never'}</dd>
    </dl>
    <h3>Transparency</h3>
    ${receiptCell(t)}
  </aside>`;
}

export function runPage(input: RunPageInput): string {
  const { run, viewer } = input;
  const now = input.now ?? new Date();
  const kinds = Object.keys(run.artifacts).sort((a, b) =>
    a === 'aibom' ? -1 : b === 'aibom' ? 1 : a < b ? -1 : 1,
  );
  const status = new Map(run.steps.map((s) => [s.id, s]));
  const body = html`<p><a href="/ui/runs">← Runs</a></p>
    <h1>${run.name} <span class="muted">in ${run.namespace}</span></h1>
    <dl class="kv">
      <dt>Phase</dt>
      <dd>${phaseBadge(run.phase)}</dd>
      <dt>Run id</dt>
      <dd><code>${run.id}</code></dd>
      ${
        run.created_at !== undefined
          ? html`<dt>Created</dt>
              <dd>${age(run.created_at, now)} ago</dd>`
          : ''
      }
    </dl>
    ${packSection(run.policy_pack)}
    <section aria-labelledby="dag-title">
      <h2 id="dag-title">Steps</h2>
      ${dag(run.spec, status)} ${stepsTable(run, input.stepsPage ?? 0)}
    </section>
    <section aria-labelledby="artifacts-title">
      <h2 id="artifacts-title">Artifacts</h2>
      ${
        kinds.length === 0
          ? html`<p class="muted">None yet: the AIBOM is built once the run succeeds or fails.</p>`
          : html`<div class="cards">
              ${kinds.map((kind) => {
                const a = run.artifacts[kind]!;
                return html`<div class="card" id="${`artifact-${kind}`}">
                  <h3>${kind === 'aibom' ? 'AIBOM' : kind}</h3>
                  <p>${short(str(a.digest), 24)}</p>
                  <a class="button" href="${`/ui/runs/${run.id}?drawer=${encodeURIComponent(kind)}`}">Open</a>
                </div>`;
              })}
            </div>`
      }
    </section>
    <section aria-labelledby="att-title">
      <h2 id="att-title">Attestations</h2>
      ${attestationsTable(run, input.attestations, input.records)}
    </section>
    <dialog id="export-dialog" aria-labelledby="export-title">
      ${exportForm(run, [], viewer.csrf, now)}
    </dialog>
    ${input.drawer !== undefined ? drawer(run, input.drawer, now) : ''}`;
  return page(`${run.name} (${run.namespace})`, viewer, body);
}

/** The export confirmation page (the form's target without script): the dialog's content as a page. */
export function exportPage(viewer: Viewer, run: RunView, ids: readonly string[], now = new Date()): string {
  const body =
    ids.length === 0
      ? html`<p><a href="${`/ui/runs/${run.id}`}">← ${run.name}</a></p>
          <p class="error" role="alert">Select at least one attestation to export.</p>`
      : html`<p><a href="${`/ui/runs/${run.id}`}">← ${run.name}</a></p>
          <section class="card">${exportForm(run, ids, viewer.csrf, now)}</section>`;
  return page(`Export from ${run.name}`, viewer, body);
}

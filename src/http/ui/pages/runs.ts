import type { runListItem } from '../../routes/v1/run-list.ts';
import { html, url, type Html } from '../html.ts';
import { age, badge, page, type Viewer } from '../layout.ts';

export type RunListItemView = ReturnType<typeof runListItem>;

export interface RunsFilter {
  readonly namespace?: string;
  readonly phase?: string;
  readonly name_prefix?: string;
  readonly cursor?: string;
}

export interface RunListView {
  readonly items: readonly RunListItemView[];
  readonly next_cursor: string | null;
  readonly excluded_namespace_count: number;
}

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed'] as const;

export function phaseBadge(phase: string | null): Html {
  if (phase === null) return badge('unknown', 'muted');
  return badge(phase, phase === 'Succeeded' ? 'ok' : phase === 'Failed' ? 'bad' : 'warn');
}

function aibomCell(a: RunListItemView['aibom']): Html {
  return a.state === 'ready'
    ? badge('signed', 'ok')
    : a.state === 'pending'
      ? badge('pending', 'warn')
      : html`<span class="muted">not yet (run not finished)</span>`;
}

export function transparencyCell(t: RunListItemView['transparency']): Html {
  if (t === null) return html`<span class="muted">off</span>`;
  // Queued with failed attempts (or records no job will publish) reads as a problem.
  const tone = t.state === 'published' ? 'ok' : t.retrying > 0 || t.not_queued > 0 ? 'bad' : 'warn';
  const mode =
    t.mode === 'dry_run'
      ? 'dry run (own log)'
      : t.mode === 'published'
        ? 'published (remote)'
        : t.mode === 'mixed'
          ? 'mixed'
          : '';
  return html`${badge(t.state, tone)} ${mode !== '' ? html`<span class="muted">${mode}</span>` : ''}`;
}

export function runsPage(
  viewer: Viewer,
  filter: RunsFilter,
  list: RunListView,
  now = new Date(),
  /** Shown above the list (why it is empty), e.g. "name the namespaces to list". */
  message?: string,
): string {
  const query = { namespace: filter.namespace, phase: filter.phase, name_prefix: filter.name_prefix };
  const rows = list.items.map(
    (r) =>
      html`<tr>
        <td><a href="${`/ui/runs/${r.id}`}">${r.name}</a></td>
        <td>${r.namespace}</td>
        <td>${phaseBadge(r.phase)}</td>
        <td>${aibomCell(r.aibom)}</td>
        <td>${r.attestation_count}</td>
        <td>${transparencyCell(r.transparency)}</td>
        <td>
          ${r.policy_pack === null ? html`<span class="muted">?</span>` : html`<code>${r.policy_pack.name}@${r.policy_pack.version}</code>`}
        </td>
        <td>${age(r.created_at, now)}</td>
      </tr>`,
  );
  const body = html`<h1>Runs</h1>
    <form class="filters" method="get" action="/ui/runs" role="search" aria-label="Filter runs">
      <label
        >Namespaces
        <input
          name="namespace"
          value="${filter.namespace ?? ''}"
          placeholder="all you may read"
          aria-describedby="ns-help"
      /></label>
      <label
        >Phase
        <select name="phase">
          <option value="">any</option>
          ${PHASES.map((p) => html`<option${p === filter.phase ? html` selected` : ''}>${p}</option>`)}
        </select></label
      >
      <label>Name starts with <input name="name_prefix" value="${filter.name_prefix ?? ''}" /></label>
      <button type="submit">Filter</button>
      <span id="ns-help" class="muted">comma-separated, up to 16</span>
    </form>
    ${message !== undefined ? html`<p class="error" role="alert">${message}</p>` : ''}
    ${
      list.excluded_namespace_count > 0
        ? html`<p class="muted">
            ${list.excluded_namespace_count} namespace(s) you asked for or that hold runs are not shown: you
            may not list runs there.
          </p>`
        : ''
    }
    ${
      list.items.length === 0
        ? html`<p>No runs${filter.cursor !== undefined ? ' on this page' : ''}.</p>`
        : html`<table>
            <caption class="muted">
              Newest first${filter.cursor !== undefined ? ' (a later page)' : ''}
            </caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Namespace</th>
                <th scope="col">Phase</th>
                <th scope="col">AIBOM</th>
                <th scope="col">Attestations</th>
                <th scope="col">Transparency</th>
                <th scope="col">Policy pack</th>
                <th scope="col">Age</th>
              </tr>
            </thead>
            <tbody>
              ${rows}
            </tbody>
          </table>`
    }
    <nav class="pager" aria-label="Pages">
      ${
        filter.cursor !== undefined ? html`<a href="${url('/ui/runs', query)}">First page</a>` : ''
      }${list.next_cursor !== null ? html`<a href="${url('/ui/runs', { ...query, cursor: list.next_cursor })}" rel="next">Next page</a>` : ''}
    </nav>`;
  return page('Runs', viewer, body);
}

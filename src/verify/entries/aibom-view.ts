import { hash } from 'node:crypto';
import type { Aibom } from '../../aibom/index.ts';
import {
  serializeView,
  verifyView,
  VIEW_FORMAT_NAMES,
  VIEW_FORMATS,
  type ViewFormat,
} from '../../aibom/views/index.ts';
import { subjectNames } from '../../attest/index.ts';
import { Paths } from '../../export/layout.ts';
import type { EntryHandler } from '../entry.ts';
import type { BundleState, OpenRecord } from '../state.ts';

/**
 * `runs/<run>/aibom.cdx-1.7.json`, `aibom.spdx-3.0.1.json`: a standard view of a run's AIBOM,
 * right after the view's own record (kind `artifact`, the standard's predicate type, subject
 * `artifact:<run>:<name>`; docs/aibom.md). When that record closes, the view file must be there and
 * be the bytes the record signs. When the run's AIBOM came earlier in the bundle (ids increase: an
 * AIBOM precedes its views), the view must be the one its metadata lists and be about that AIBOM,
 * and its evidence must name the AIBOM's records with the digests this bundle holds, every one of
 * them when the bundle holds them all (src/aibom/views/verify.ts).
 */

interface ViewState {
  /** Record id → digest of every record closed so far. */
  readonly digests: Map<string, string>;
  /** Each run's AIBOM seen in the bundle: the signed bytes as parsed, their digest, its metadata. */
  readonly aiboms: Map<string, { bom: Aibom; digest: string; metadata: Record<string, unknown> }>;
  /** The view file read next to the open view record. */
  readonly files: WeakMap<OpenRecord, Buffer>;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The view a record is the record of, if any. */
function viewFormatOf(r: OpenRecord): ViewFormat | undefined {
  const run = r.record.run_id;
  const statement = r.statement;
  if (r.record.kind !== 'artifact' || typeof run !== 'string' || statement === undefined) return undefined;
  return VIEW_FORMAT_NAMES.find(
    (f) =>
      VIEW_FORMATS[f].predicateType === statement.predicateType &&
      statement.subject[0]?.name === subjectNames.artifact(run, VIEW_FORMATS[f].artifactName),
  );
}

const stateOf = (state: BundleState): ViewState =>
  state.slot(aibomViewEntry, () => ({ digests: new Map(), aiboms: new Map(), files: new WeakMap() }));

function rememberAibom(views: ViewState, r: OpenRecord): void {
  const run = r.record.run_id;
  if (r.record.kind !== 'aibom' || typeof run !== 'string' || r.aibom?.bytes === undefined) return;
  try {
    const bom = JSON.parse(r.aibom.bytes.toString('utf8')) as Aibom;
    const metadata: unknown = JSON.parse(r.aibom.metadata?.toString('utf8') ?? 'null');
    if (isObject(metadata) && bom.trust !== undefined && bom.metadata !== undefined) {
      views.aiboms.set(run, { bom, digest: `sha256:${hash('sha256', r.aibom.bytes)}`, metadata });
    }
  } catch {
    // A malformed AIBOM is the AIBOM handler's problem (MALFORMED_AIBOM).
  }
}

function checkView(state: BundleState, views: ViewState, r: OpenRecord, format: ViewFormat): void {
  const run = String(r.record.run_id);
  const path = Paths.aibomView(run, VIEW_FORMATS[format].artifactName);
  const bytes = views.files.get(r);
  if (bytes === undefined) {
    state.fail(path, 'MISSING', `the ${format} view record ${r.id} is exported without the view`);
    return;
  }
  const aibom = views.aiboms.get(run);
  if (aibom === undefined) {
    // Its AIBOM is not in this bundle: the bytes must still be the ones the record signs.
    const signed = r.statement?.subject[0]?.digest.sha256;
    if (
      r.statement === undefined ||
      signed !== hash('sha256', bytes) ||
      !serializeView(r.statement.predicate).equals(bytes)
    ) {
      state.fail(path, 'VIEW_NOT_SIGNED', `not the view attestation ${r.id} signs`);
    }
    return;
  }
  const result = verifyView(
    format,
    { format, bytes, record: r.record },
    {
      bom: aibom.bom,
      aibomDigest: aibom.digest,
      views: aibom.metadata.views,
      trust: r.trust,
      records: views.digests,
      recordsComplete: aibom.bom.trust.attestation_ids.every((id) => views.digests.has(id)),
    },
  );
  for (const p of result.problems) state.fail(path, p.code, p.message);
}

export const aibomViewEntry: EntryHandler = {
  name: 'AIBOM view',
  pattern: /^runs\/([0-9a-f-]{36})\/(aibom\.cdx-1\.7\.json|aibom\.spdx-3\.0\.1\.json)$/,
  start(state) {
    state.onRecordClose((s, r) => {
      const views = stateOf(s);
      if (typeof r.record.digest === 'string') views.digests.set(r.id, r.record.digest);
      rememberAibom(views, r);
      const format = viewFormatOf(r);
      if (format !== undefined) checkView(s, views, r, format);
    });
  },
  onEntry(state, entry) {
    const r = state.open;
    const format = VIEW_FORMAT_NAMES.find((f) => VIEW_FORMATS[f].artifactName === entry.match[2]);
    if (
      r === undefined ||
      r.record.run_id !== entry.match[1] ||
      format === undefined ||
      viewFormatOf(r) !== format
    ) {
      state.fail(entry.path, 'UNEXPECTED_ENTRY', `not next to the ${String(format)} view record of its run`);
      return;
    }
    stateOf(state).files.set(r, entry.content);
  },
};

/**
 * What the schemas and the independent validators cannot check, checked here (pure):
 * - CycloneDX 1.7 declarations: every reference in `declarations` resolves to a `bom-ref` of the
 *   document; every standard requirement has exactly one map entry and one claim; every evidence
 *   entry names a record (`urn:uuid:<id>`) and its digest, and, given the records of the bundle it
 *   travels with, that record is there with that digest.
 * - SPDX 3.0.1 profiles: tools-java checks the JSON-LD against the model but not profile
 *   conformance, so the AI and Dataset profiles' required properties and their licence
 *   relationships (exactly one hasConcludedLicense and one hasDeclaredLicense per package) are
 *   checked here, and every relationship end and document element resolves.
 */

export interface ViewProblem {
  readonly code: string;
  /** JSON Pointer of the offending value. */
  readonly path: string;
  readonly message: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function collectBomRefs(value: unknown, into: Set<string>): void {
  if (Array.isArray(value)) for (const v of value) collectBomRefs(v, into);
  else if (isRecord(value)) {
    const ref = value['bom-ref'];
    if (typeof ref === 'string') into.add(ref);
    for (const v of Object.values(value)) collectBomRefs(v, into);
  }
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const URN_UUID = /^urn:uuid:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The record an evidence entry names: its id and digest, or undefined when it names none. */
export function evidenceRecord(evidence: unknown): { id: string; digest: string } | undefined {
  if (!isRecord(evidence)) return undefined;
  let id: string | undefined;
  let digest: string | undefined;
  for (const d of arr(evidence.data)) {
    if (!isRecord(d) || !isRecord(d.contents)) continue;
    if (d.name === 'attestation') id = URN_UUID.exec(str(d.contents.url) ?? '')?.[1];
    if (d.name === 'dsse-digest' && isRecord(d.contents.attachment)) {
      const content = str(d.contents.attachment.content);
      if (content !== undefined && DIGEST.test(content)) digest = content;
    }
  }
  return id !== undefined && digest !== undefined ? { id, digest } : undefined;
}

/**
 * Problems of a CycloneDX 1.7 view's `declarations` (empty = none). With `records` (id → digest,
 * e.g. the records of an export bundle), every evidence entry must name one of them, digest equal;
 * with `complete: false` (a selection of the records only), evidence naming a record not among them
 * is not a problem, one naming a record among them with another digest still is.
 */
export function declarationProblems(
  doc: unknown,
  records?: ReadonlyMap<string, string>,
  options: { complete?: boolean } = {},
): ViewProblem[] {
  const problems: ViewProblem[] = [];
  const refs = new Set<string>();
  collectBomRefs(doc, refs);
  const d = isRecord(doc) && isRecord(doc.declarations) ? doc.declarations : undefined;
  if (d === undefined) {
    return [{ code: 'NO_DECLARATIONS', path: '/declarations', message: 'the view has no declarations' }];
  }
  const resolve = (ref: unknown, path: string) => {
    if (typeof ref !== 'string' || !refs.has(ref)) {
      problems.push({ code: 'DANGLING_REF', path, message: `${String(ref)} names no bom-ref of the view` });
    }
  };
  const mapped = new Map<string, number>();
  arr(d.attestations).forEach((a, i) => {
    if (!isRecord(a)) return;
    resolve(a.assessor, `/declarations/attestations/${i}/assessor`);
    arr(a.map).forEach((m, j) => {
      if (!isRecord(m)) return;
      const at = `/declarations/attestations/${i}/map/${j}`;
      resolve(m.requirement, `${at}/requirement`);
      if (typeof m.requirement === 'string') mapped.set(m.requirement, (mapped.get(m.requirement) ?? 0) + 1);
      const claims = [...arr(m.claims), ...arr(m.counterClaims)];
      if (claims.length !== 1) {
        problems.push({
          code: 'CLAIM_COUNT',
          path: at,
          message: `requirement ${String(m.requirement)} has ${claims.length} claims, not one`,
        });
      }
      arr(m.claims).forEach((c, k) => resolve(c, `${at}/claims/${k}`));
      arr(m.counterClaims).forEach((c, k) => resolve(c, `${at}/counterClaims/${k}`));
    });
  });
  const definitions = isRecord(doc) && isRecord(doc.definitions) ? doc.definitions : {};
  arr(definitions.standards).forEach((s, i) => {
    if (!isRecord(s)) return;
    arr(s.requirements).forEach((r, j) => {
      const ref = isRecord(r) ? r['bom-ref'] : undefined;
      if (typeof ref === 'string' && mapped.get(ref) !== 1) {
        problems.push({
          code: 'REQUIREMENT_UNMAPPED',
          path: `/definitions/standards/${i}/requirements/${j}`,
          message: `requirement ${ref} has ${mapped.get(ref) ?? 0} map entries, not one`,
        });
      }
    });
  });
  arr(d.claims).forEach((c, i) => {
    if (!isRecord(c)) return;
    resolve(c.target, `/declarations/claims/${i}/target`);
    arr(c.evidence).forEach((e, j) => resolve(e, `/declarations/claims/${i}/evidence/${j}`));
  });
  arr(d.evidence).forEach((e, i) => {
    const named = evidenceRecord(e);
    if (named === undefined) {
      problems.push({
        code: 'EVIDENCE_RECORD',
        path: `/declarations/evidence/${i}`,
        message: 'evidence names no record (attestation urn:uuid and dsse-digest sha256)',
      });
    } else if (
      records !== undefined &&
      records.get(named.id) !== named.digest &&
      (records.has(named.id) || options.complete !== false)
    ) {
      problems.push({
        code: 'EVIDENCE_NOT_IN_BUNDLE',
        path: `/declarations/evidence/${i}`,
        message: records.has(named.id)
          ? `record ${named.id} has digest ${String(records.get(named.id))}, the evidence says ${named.digest}`
          : `record ${named.id} is not among the records given`,
      });
    }
  });
  return problems;
}

/** Values SPDX uses for "no licence information": both count as an AnyLicenseInfo. */
const LICENSE_INDIVIDUALS = new Set([
  'expandedlicensing_NoAssertionLicense',
  'expandedlicensing_NoneLicense',
]);
const SPDX_INDIVIDUALS = new Set([
  ...LICENSE_INDIVIDUALS,
  'NoAssertionElement',
  'NoneElement',
  'SpdxOrganization',
]);
const LICENSE_TYPES = new Set([
  'simplelicensing_LicenseExpression',
  'expandedlicensing_ListedLicense',
  'expandedlicensing_CustomLicense',
  'expandedlicensing_ConjunctiveLicenseSet',
  'expandedlicensing_DisjunctiveLicenseSet',
  'expandedlicensing_OrLaterOperator',
  'expandedlicensing_WithAdditionOperator',
]);
const SPDX_DATETIME = /^\d\d\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** The properties a profile makes required beyond the class (SPDX 3.0.1 "External properties restrictions"). */
const REQUIRED: Readonly<Record<string, readonly string[]>> = {
  ai_AIPackage: [
    'releaseTime',
    'suppliedBy',
    'software_downloadLocation',
    'software_packageVersion',
    'software_primaryPurpose',
  ],
  dataset_DatasetPackage: [
    'builtTime',
    'originatedBy',
    'releaseTime',
    'software_downloadLocation',
    'software_primaryPurpose',
    'dataset_datasetType',
  ],
};

/**
 * AI and Dataset profile conformance of an SPDX 3.0.1 JSON-LD view (empty = conformant), plus
 * that every relationship end and every listed element is defined in the graph.
 */
export function spdxProfileProblems(doc: unknown): ViewProblem[] {
  const problems: ViewProblem[] = [];
  const graph = isRecord(doc) ? arr(doc['@graph']) : [];
  const byId = new Map<string, Record<string, unknown>>();
  graph.forEach((e) => {
    if (isRecord(e) && typeof e.spdxId === 'string') byId.set(e.spdxId, e);
  });
  const defined = (ref: unknown) => typeof ref === 'string' && (byId.has(ref) || SPDX_INDIVIDUALS.has(ref));
  const isLicense = (ref: unknown) =>
    typeof ref === 'string' &&
    (LICENSE_INDIVIDUALS.has(ref) || LICENSE_TYPES.has(String(byId.get(ref)?.type)));
  const licences = new Map<string, { concluded: number; declared: number }>();
  graph.forEach((e, i) => {
    if (!isRecord(e)) return;
    const at = `/@graph/${i}`;
    if (e.type === 'Relationship') {
      if (!defined(e.from))
        problems.push({
          code: 'DANGLING_ELEMENT',
          path: `${at}/from`,
          message: `${String(e.from)} is not in the graph`,
        });
      arr(e.to).forEach((t, j) => {
        if (!defined(t))
          problems.push({
            code: 'DANGLING_ELEMENT',
            path: `${at}/to/${j}`,
            message: `${String(t)} is not in the graph`,
          });
      });
      const kind =
        e.relationshipType === 'hasConcludedLicense'
          ? 'concluded'
          : e.relationshipType === 'hasDeclaredLicense'
            ? 'declared'
            : undefined;
      if (kind !== undefined && typeof e.from === 'string') {
        const to = arr(e.to);
        if (to.length !== 1 || !isLicense(to[0])) {
          problems.push({
            code: 'LICENSE_TARGET',
            path: `${at}/to`,
            message: `a ${String(e.relationshipType)} relationship must point at one AnyLicenseInfo`,
          });
        }
        const c = licences.get(e.from) ?? { concluded: 0, declared: 0 };
        c[kind] += 1;
        licences.set(e.from, c);
      }
    }
    if (e.type === 'SpdxDocument') {
      [...arr(e.element), ...arr(e.rootElement)].forEach((x) => {
        if (!defined(x))
          problems.push({
            code: 'DANGLING_ELEMENT',
            path: `${at}/element`,
            message: `${String(x)} is not in the graph`,
          });
      });
    }
  });
  graph.forEach((e, i) => {
    if (!isRecord(e) || typeof e.type !== 'string') return;
    const required = REQUIRED[e.type];
    if (required === undefined) return;
    const at = `/@graph/${i}`;
    for (const p of required) {
      const v = e[p];
      if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0)) {
        problems.push({
          code: 'PROFILE_REQUIRED',
          path: `${at}/${p}`,
          message: `${e.type} ${String(e.spdxId)} lacks ${p}, which its profile requires`,
        });
      }
    }
    for (const t of ['releaseTime', 'builtTime'] as const) {
      if (e[t] !== undefined && (typeof e[t] !== 'string' || !SPDX_DATETIME.test(e[t]))) {
        problems.push({
          code: 'DATETIME',
          path: `${at}/${t}`,
          message: `${t} is not an SPDX DateTime (YYYY-MM-DDThh:mm:ssZ)`,
        });
      }
    }
    if (e.type === 'dataset_DatasetPackage' && arr(e.originatedBy).length !== 1) {
      problems.push({
        code: 'PROFILE_REQUIRED',
        path: `${at}/originatedBy`,
        message: 'a DatasetPackage has exactly one originatedBy',
      });
    }
    const c = typeof e.spdxId === 'string' ? licences.get(e.spdxId) : undefined;
    if (c?.concluded !== 1 || c.declared !== 1) {
      problems.push({
        code: 'PROFILE_LICENSES',
        path: at,
        message: `${e.type} ${String(e.spdxId)} has ${c?.concluded ?? 0} hasConcludedLicense and ${c?.declared ?? 0} hasDeclaredLicense relationships; its profile wants exactly one of each`,
      });
    }
  });
  return problems;
}

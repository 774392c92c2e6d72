import { referentialProblems, schemaProblems, schemaValidator, type CycloneDxProblem } from '../validate.ts';
import { declarationProblems, type ViewProblem } from './check.ts';
import type { CycloneDx17Bom } from './cyclonedx17.ts';

/**
 * Every problem of a CycloneDX 1.7 view (empty = valid): the official 1.7 JSON schema in strict
 * mode (`@cyclonedx/cyclonedx-library`, which reads its bundled schema: not pure, loaded on first
 * use), the referential checks of the 1.5 view (unique bom-refs, dependency refs, hash lengths,
 * attestation URLs) and the declarations' (check.ts). With `records` (id → record digest), every
 * evidence entry must name one of them.
 */
export async function validateCycloneDx17(
  doc: CycloneDx17Bom | string,
  records?: ReadonlyMap<string, string>,
): Promise<(CycloneDxProblem | ViewProblem)[]> {
  const text = typeof doc === 'string' ? doc : JSON.stringify(doc);
  const parsed: unknown = typeof doc === 'string' ? JSON.parse(doc) : doc;
  const error = await (await schemaValidator('1.7')).validate(text);
  return [
    ...(error === null ? [] : schemaProblems(error)),
    ...referentialProblems(parsed),
    ...declarationProblems(parsed, records),
  ];
}

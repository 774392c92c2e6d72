import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import artifactSchema from '../../docs/predicates/artifact.schema.json' with { type: 'json' };
import capabilitySchema from '../../docs/predicates/capability.schema.json' with { type: 'json' };
import cyclonedxSchema from '../../docs/predicates/cyclonedx-bom.schema.json' with { type: 'json' };
import policySchema from '../../docs/predicates/policy.schema.json' with { type: 'json' };
import provenanceSchema from '../../docs/predicates/slsa-provenance-v1.schema.json' with { type: 'json' };
import spdxSchema from '../../docs/predicates/spdx-document-v3.schema.json' with { type: 'json' };
import stepSchema from '../../docs/predicates/step.schema.json' with { type: 'json' };
import { AttestError } from './errors.ts';
import { PredicateTypes, STATEMENT_TYPE, type PredicateType } from './statement.ts';

/**
 * Predicate schemas. Single source of truth: the JSON Schema files published in docs/predicates
 * are imported as data, so what external verifiers read is byte for byte what this verifier and
 * the builders enforce (no generator step to forget, no second copy to drift). The TypeScript
 * predicate interfaces mirror them by hand; the golden tests validate every builder's output
 * against these schemas, which is what keeps the two in step.
 */
const predicateSchemas: Record<PredicateType, object> = {
  [PredicateTypes.provenance]: provenanceSchema,
  [PredicateTypes.aibom]: cyclonedxSchema,
  [PredicateTypes.spdx]: spdxSchema,
  [PredicateTypes.step]: stepSchema,
  [PredicateTypes.policy]: policySchema,
  [PredicateTypes.artifact]: artifactSchema,
  [PredicateTypes.capability]: capabilitySchema,
};

/** in-toto Statement v1, restricted to a sha256 digest on every subject (what the vault checks). */
const statementSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://vault.service.dev/attestations/schemas/statement-v1.schema.json',
  type: 'object',
  required: ['_type', 'subject', 'predicateType', 'predicate'],
  properties: {
    _type: { const: STATEMENT_TYPE },
    subject: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['name', 'digest'],
        properties: {
          name: { type: 'string', minLength: 1 },
          digest: {
            type: 'object',
            required: ['sha256'],
            properties: { sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
            additionalProperties: { type: 'string' },
          },
        },
      },
    },
    predicateType: { type: 'string', format: 'uri' },
    predicate: { type: 'object' },
  },
} as const;

// ajv and ajv-formats are CommonJS; under NodeNext their default export is module.exports, whose
// `default` member is the function (ajv's named export above sidesteps that).
const addFormats = addFormatsModule.default;

let ajv: Ajv2020 | undefined;
const compiled = new Map<string, ValidateFunction>();

/** Compiles each schema once, on first use (a CLI that never verifies pays nothing). */
function validator(key: string, schema: object): ValidateFunction {
  let validate = compiled.get(key);
  if (validate === undefined) {
    if (ajv === undefined) {
      // strict: schema mistakes (unknown keywords, untyped subschemas) fail loudly instead of being
      // ignored. strictRequired is off: it rejects the standard if/then idiom that requires a
      // property declared one level up.
      ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
      addFormats(ajv);
    }
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  return validate;
}

function describe(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map(
    (e) => `${e.instancePath === '' ? '/' : e.instancePath} ${e.message ?? e.keyword}`,
  );
}

export function isKnownPredicateType(type: string): type is PredicateType {
  return Object.hasOwn(predicateSchemas, type);
}

/** Schema violations of `predicate` (empty when valid); undefined when the type is unknown. */
export function predicateProblems(predicateType: string, predicate: unknown): string[] | undefined {
  if (!isKnownPredicateType(predicateType)) return undefined;
  const validate = validator(predicateType, predicateSchemas[predicateType]);
  return validate(predicate) ? [] : describe(validate.errors);
}

/** Schema violations of an in-toto Statement v1 envelope payload (predicate content not included). */
export function statementProblems(statement: unknown): string[] {
  const validate = validator(STATEMENT_TYPE, statementSchema);
  return validate(statement) ? [] : describe(validate.errors);
}

/** Builders call this before returning: an attestation the verifier would reject is never signed. */
export function assertPredicate(predicateType: PredicateType, predicate: unknown): void {
  const problems = predicateProblems(predicateType, predicate) ?? [];
  if (problems.length > 0) {
    throw new AttestError('PREDICATE_INVALID', `${predicateType} predicate: ${problems.join('; ')}`);
  }
}

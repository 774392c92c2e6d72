import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyTypeProvider,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { exportBodySchema } from './routes/v1/export.ts';
import type { queryBodySchema } from './schemas.ts';

/**
 * Route request types come from the route's JSON schema (json-schema-to-ts's FromSchema as a Fastify
 * type provider), so the schema that validates a request, the OpenAPI document and the handler's
 * TypeScript types are one definition and cannot drift. The schemas stay plain `as const` objects:
 * the served OpenAPI is what it was before types were derived from them.
 *
 * Only the request side (params, querystring, body, headers) is typed from the schema. Replies stay
 * untyped as before: response schemas name shared components by `$ref` that the serializer
 * resolves at run time, and typing them would make every handler's answer a compile-time puzzle
 * without checking more than the serializer already does.
 *
 * Bodies named by `$ref` ('AttestationQuery#', 'ExportRequest#') resolve through `references`.
 */
type References = [typeof queryBodySchema, typeof exportBodySchema];

export interface SchemaProvider extends FastifyTypeProvider {
  validator: this['schema'] extends JSONSchema
    ? FromSchema<this['schema'], { references: References }>
    : unknown;
  serializer: unknown;
}

/** The app (or a plugin scope) whose routes take their request types from their schemas. */
export type TypedApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  SchemaProvider
>;

export function typed(app: FastifyInstance): TypedApp {
  return app.withTypeProvider<SchemaProvider>();
}

/** What a schema validates, as a TypeScript type (for schemas shared by `$ref`). */
export type { FromSchema } from 'json-schema-to-ts';

import type { FastifyRequest } from 'fastify';
import type { Audience } from '../views/envelope.ts';
import type { Authorizer } from './authorizer.ts';
import { isAllowed } from './plugin.ts';

/**
 * Whether the caller reads records as a chain verifier (positions: `seq`, `prev_digest`,
 * `transparency.log_index`) or as a tenant (without them): `get` on attestations/chain,
 * cluster-wide, the permission of the chain API (docs/chain.md). One SubjectAccessReview, cached
 * like every other decision.
 */
export async function audienceOf(authorizer: Authorizer, req: FastifyRequest): Promise<Audience> {
  const positions = await isAllowed(authorizer, req, {
    namespace: '',
    verb: 'get',
    resource: 'attestations',
    subresource: 'chain',
  });
  return { positions };
}

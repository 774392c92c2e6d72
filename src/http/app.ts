import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../log/index.ts';

export interface AppDeps {
  readonly logger: Logger;
  /** Resolves when every dependency the API needs answers; drives /readyz. */
  readonly ready?: () => Promise<void>;
}

/**
 * Builds the sidecar's Fastify application without listening, so tests drive it with `inject()`
 * and the entry point alone decides the address.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger = deps.logger;
  const app = Fastify({ loggerInstance });
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      await deps.ready?.();
      return { status: 'ready' };
    } catch (err) {
      return reply.code(503).send({ status: 'not ready', reason: (err as Error).message });
    }
  });
  await app.ready();
  return app;
}

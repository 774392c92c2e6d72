#!/usr/bin/env node
import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { runUntilSignal } from '../lifecycle.ts';
import { buildApp } from '../http/app.ts';
import { fatalConfig } from './common.ts';

const config = fatalConfig(() => loadConfig('sidecar'));
const logger = createLogger('sidecar', config.LOG_LEVEL);

await runUntilSignal(logger, async () => {
  const app = await buildApp({ logger });
  const address = await app.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
  logger.info({ address }, 'sidecar listening');
  return () => app.close();
});

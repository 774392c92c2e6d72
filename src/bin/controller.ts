#!/usr/bin/env node
import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { runUntilSignal } from '../lifecycle.ts';
import { startOpsServer } from '../ops/server.ts';
import { fatalConfig } from './common.ts';

const config = fatalConfig(() => loadConfig('controller'));
const logger = createLogger('controller', config.LOG_LEVEL);

await runUntilSignal(logger, async () => {
  const ops = await startOpsServer({ logger: logger.child({ component: 'ops' }), port: config.METRICS_PORT });
  logger.info({ port: ops.port }, 'controller started');
  return async () => {
    await ops.close();
  };
});

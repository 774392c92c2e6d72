#!/usr/bin/env node
import { ConfigError, loadConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { fatalConfig } from './common.ts';
import { runUntilSignal } from './lifecycle.ts';
import { startSidecarProcess } from './sidecar-process.ts';

const config = fatalConfig(() => {
  const c = loadConfig('sidecar');
  if (c.HTTP_HEADERS_TIMEOUT_MS > c.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS']);
  }
  return c;
});
const logger = createLogger('sidecar', config.LOG_LEVEL);

await runUntilSignal(logger, () => startSidecarProcess(config, logger));

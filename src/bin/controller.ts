#!/usr/bin/env node
import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { fatalConfig } from './common.ts';
import { startControllerProcess } from './controller-process.ts';
import { runUntilSignal } from './lifecycle.ts';

const config = fatalConfig(() => loadConfig('controller'));
const logger = createLogger('controller', config.LOG_LEVEL);

await runUntilSignal(logger, () => startControllerProcess(config, logger));

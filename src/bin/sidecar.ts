#!/usr/bin/env node
import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { runUntilSignal } from '../lifecycle.ts';
import { buildApp } from '../http/app.ts';
import { kubernetesAuthorizer } from '../http/auth/authorizer.ts';
import { listNamespaces } from '../vault/namespaces.ts';
import { fatalConfig, kubeConfigFrom, openVaultFrom } from './common.ts';

const config = fatalConfig(() => loadConfig('sidecar'));
const logger = createLogger('sidecar', config.LOG_LEVEL);

await runUntilSignal(logger, async () => {
  const vault = await openVaultFrom(config, logger, 'aibom-vault-sidecar');
  const kc = kubeConfigFrom(config);
  const app = await buildApp({
    logger,
    vault,
    authorizer: kubernetesAuthorizer(kc),
    listNamespaces: () => listNamespaces(vault.pool),
    ready: async () => {
      await vault.pool.query('select 1');
    },
  });
  const address = await app.listen({ host: config.HTTP_HOST, port: config.HTTP_PORT });
  logger.info({ address }, 'sidecar listening');
  return async () => {
    await app.close();
    await vault.pool.end();
  };
});

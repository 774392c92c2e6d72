import type { X509Certificate } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp, type AppDeps } from '../../src/http/app.ts';
import { kubernetesAuthorizer } from '../../src/http/auth/authorizer.ts';
import type { Vault } from '../../src/vault/index.ts';
import { stackBlobs } from './blobs.ts';
import { kubeAccess } from './stack.ts';

/**
 * The sidecar's API as the sidecar wires it, against the stack: the stack's MinIO, real
 * TokenReview/SubjectAccessReview as the service identity, signed exports required. `extra`
 * overrides or adds dependencies (transparency, SCRAPI trust anchors, ...).
 */
export function stackApp(
  vault: Vault,
  trustAnchors: readonly X509Certificate[],
  extra: Partial<AppDeps> = {},
): Promise<FastifyInstance> {
  return buildApp({
    logger: pino({ level: 'silent' }),
    vault,
    blobs: stackBlobs(),
    // The sidecar's own identity, which RBAC allows to create TokenReviews and SubjectAccessReviews.
    authorizer: kubernetesAuthorizer(kubeAccess('aibom-vault')),
    listNamespaces: () => vault.attestations.namespaces(),
    requireSignedExports: true,
    trustAnchors,
    ...extra,
  });
}

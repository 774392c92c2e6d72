import { GROUP, VERSION, type Run, type RunStatus } from '../../api/run.ts';
import {
  addFinalizer,
  applyStatus,
  isAlreadyExists,
  isNotFound,
  removeFinalizer,
  resourcePath,
  type EventRecorder,
  type KubeClient,
  type ResourceType,
} from '../runtime/index.ts';
import { FIELD_MANAGER, FINALIZER } from './reasons.ts';
import type { AttestationSummary, RunApi } from './reconciler.ts';

export const RUN_TYPE: ResourceType = { group: GROUP, version: VERSION, plural: 'runs', kind: 'Run' };
export const ATTESTATION_TYPE: ResourceType = {
  group: GROUP,
  version: VERSION,
  plural: 'attestations',
  kind: 'Attestation',
};

/** RunApi over the Kubernetes API: live reads, SSA status, guarded finalizer patches, owned Attestations. */
export function kubeRunApi(client: KubeClient, events: EventRecorder): RunApi {
  return {
    async get(namespace, name) {
      try {
        return await client.request<Run>({
          method: 'GET',
          path: resourcePath(RUN_TYPE, { namespace, name }),
        });
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },
    addFinalizer: (run) => addFinalizer(client, RUN_TYPE, run, FINALIZER),
    async removeFinalizer(run) {
      await removeFinalizer(client, RUN_TYPE, run, FINALIZER);
    },
    async applyStatus(run: Run, status: RunStatus) {
      await applyStatus(
        client,
        RUN_TYPE,
        { namespace: run.metadata.namespace, name: run.metadata.name },
        status as Record<string, unknown>,
        { fieldManager: FIELD_MANAGER },
      );
    },
    async ensureAttestation(run: Run, a: AttestationSummary) {
      try {
        await client.request({
          method: 'POST',
          path: resourcePath(ATTESTATION_TYPE, { namespace: run.metadata.namespace }),
          query: { fieldManager: FIELD_MANAGER },
          body: {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: 'Attestation',
            metadata: {
              // The vault id is a valid DNS-1123 name and unique: creating twice is AlreadyExists.
              name: a.id,
              namespace: run.metadata.namespace,
              labels: { 'vault.service.dev/run': run.metadata.name, 'vault.service.dev/kind': a.kind },
              ownerReferences: [
                {
                  apiVersion: `${GROUP}/${VERSION}`,
                  kind: 'Run',
                  name: run.metadata.name,
                  uid: run.metadata.uid,
                  controller: true,
                  blockOwnerDeletion: false,
                },
              ],
            },
            spec: {
              id: a.id,
              kind: a.kind,
              predicateType: a.predicateType,
              subjects: [...a.subjects],
              digest: a.digest,
              runId: run.metadata.uid,
            },
          },
        });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
    },
    event: (run, type, reason, note) => events.event(run, type, reason, note),
    async attestationTransparency(run: Run) {
      const list = await client.request<{
        items: { spec: { id: string }; status?: { transparency?: unknown } }[];
      }>({
        method: 'GET',
        path: resourcePath(ATTESTATION_TYPE, { namespace: run.metadata.namespace }),
        query: { labelSelector: `vault.service.dev/run=${run.metadata.name}` },
      });
      return new Map(list.items.map((i) => [i.spec.id, i.status?.transparency]));
    },
    async applyAttestationStatus(run: Run, id: string, status: Record<string, unknown>) {
      await applyStatus(client, ATTESTATION_TYPE, { namespace: run.metadata.namespace, name: id }, status, {
        fieldManager: FIELD_MANAGER,
      });
    },
  };
}

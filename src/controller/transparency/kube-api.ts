import { TRANSPARENCY_FIELD_MANAGER } from '../../crd/reasons.ts';
import type { Run } from '../../crd/run.ts';
import { applyStatus, type EventRecorder, type KubeClient } from '../../kube/index.ts';
import { applyRunStatus, ATTESTATION_TYPE, listRunAttestations } from '../run/kube-api.ts';
import type { ProjectionApi } from './projection.ts';

/** ProjectionApi over the Kubernetes API: SSA under the projection's own field manager. */
export function kubeProjectionApi(
  client: KubeClient,
  events: EventRecorder,
  cache: (namespace: string, name: string) => Run | undefined,
): ProjectionApi {
  const apply = { fieldManager: TRANSPARENCY_FIELD_MANAGER };
  return {
    cached: (namespace, name) => cache(namespace, name) ?? null,
    async attestationTransparency(run) {
      const items = await listRunAttestations<{ transparency?: unknown }>(client, run);
      return new Map(items.map((i) => [i.spec.id, i.status?.transparency]));
    },
    async applyAttestationTransparency(run, id, transparency) {
      await applyStatus(
        client,
        ATTESTATION_TYPE,
        { namespace: run.metadata.namespace, name: id },
        { transparency },
        apply,
      );
    },
    applyRunTransparency: (run, status) => applyRunStatus(client, run, status, TRANSPARENCY_FIELD_MANAGER),
    event: (run, type, reason, note) => events.event(run, type, reason, note),
  };
}

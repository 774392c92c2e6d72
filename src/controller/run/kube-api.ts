import { createHash } from 'node:crypto';
import { FIELD_MANAGER, FINALIZER } from '../../crd/reasons.ts';
import { ATTESTATION_PLURAL, GROUP, RUN_PLURAL, VERSION, type Run, type RunStatus } from '../../crd/run.ts';
import {
  addFinalizer,
  applyStatus,
  isAlreadyExists,
  isConflict,
  isNotFound,
  removeFinalizer,
  resourcePath,
  type EventRecorder,
  type KubeClient,
  type ResourceType,
} from '../../kube/index.ts';
import type { RunApi } from './reconciler.ts';

export const RUN_TYPE: ResourceType = { group: GROUP, version: VERSION, plural: RUN_PLURAL, kind: 'Run' };
export const ATTESTATION_TYPE: ResourceType = {
  group: GROUP,
  version: VERSION,
  plural: ATTESTATION_PLURAL,
  kind: 'Attestation',
};

/**
 * The value of the `vault.service.dev/run` label that ties Attestation resources to their Run: the
 * Run's name. Admission keeps Run names to 63 characters, a label value's limit (the CRD's rule);
 * a longer name (a Run admitted before that rule) is cut to 46 characters plus a hash of the whole
 * name, so its resources can still be created and listed.
 */
export function runLabelValue(name: string): string {
  if (name.length <= 63) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 16);
  return `${name.slice(0, 46).replace(/[-.]+$/, '')}-${hash}`;
}

/** Live GET of a Run; null when it is gone. */
export async function getRun(client: KubeClient, namespace: string, name: string): Promise<Run | null> {
  try {
    return await client.request<Run>({ method: 'GET', path: resourcePath(RUN_TYPE, { namespace, name }) });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** Server-side apply of `status` onto a Run as `fieldManager` (its complete set of fields). */
export async function applyRunStatus(
  client: KubeClient,
  run: Run,
  status: RunStatus,
  fieldManager: string,
): Promise<void> {
  await applyStatus(
    client,
    RUN_TYPE,
    { namespace: run.metadata.namespace, name: run.metadata.name },
    status as Record<string, unknown>,
    { fieldManager },
  );
}

/** Lists the Attestation resources of a Run (by the label the controller sets on them). */
export async function listRunAttestations<S = unknown>(
  client: KubeClient,
  run: Run,
): Promise<{ spec: { id: string }; status?: S }[]> {
  const list = await client.request<{ items: { spec: { id: string }; status?: S }[] }>({
    method: 'GET',
    path: resourcePath(ATTESTATION_TYPE, { namespace: run.metadata.namespace }),
    query: { labelSelector: `vault.service.dev/run=${runLabelValue(run.metadata.name)}` },
  });
  return list.items;
}

/**
 * Runs a finalizer patch (guarded by the resourceVersion of `run`); when the copy was stale (409),
 * re-reads the Run and tries once more.
 */
async function withFreshRun<T>(
  client: KubeClient,
  run: Run,
  patch: (run: Run) => Promise<T>,
): Promise<T | null> {
  try {
    return await patch(run);
  } catch (err) {
    if (!isConflict(err)) throw err;
    const live = await getRun(client, run.metadata.namespace, run.metadata.name);
    if (live === null || live.metadata.uid !== run.metadata.uid) return null;
    return patch(live);
  }
}

/**
 * RunApi over the Kubernetes API: reads from the informer cache (`cached`), SSA status, guarded
 * finalizer patches (a live read only after a 409), owned Attestations.
 */
export function kubeRunApi(
  client: KubeClient,
  events: EventRecorder,
  cache: (namespace: string, name: string) => Run | undefined,
): RunApi {
  return {
    cached: (namespace, name) => cache(namespace, name) ?? null,
    live: (namespace, name) => getRun(client, namespace, name),
    async addFinalizer(run) {
      return (await withFreshRun(client, run, (r) => addFinalizer(client, RUN_TYPE, r, FINALIZER))) ?? run;
    },
    async removeFinalizer(run) {
      await withFreshRun(client, run, (r) => removeFinalizer(client, RUN_TYPE, r, FINALIZER));
    },
    applyStatus: (run, status) => applyRunStatus(client, run, status, FIELD_MANAGER),
    async attestationIds(run) {
      return new Set((await listRunAttestations(client, run)).map((i) => i.spec.id));
    },
    async createAttestation(run, a) {
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
              labels: {
                'vault.service.dev/run': runLabelValue(run.metadata.name),
                'vault.service.dev/kind': a.kind,
              },
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
    async deleteAttestation(run, id) {
      try {
        await client.request({
          method: 'DELETE',
          path: resourcePath(ATTESTATION_TYPE, { namespace: run.metadata.namespace, name: id }),
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
    async applyAttestationRecords(run, id, records) {
      await applyStatus(
        client,
        ATTESTATION_TYPE,
        { namespace: run.metadata.namespace, name: id },
        { records },
        { fieldManager: FIELD_MANAGER },
      );
    },
    event: (run, type, reason, note) => events.event(run, type, reason, note),
  };
}

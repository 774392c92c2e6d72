/**
 * In-memory seams for unit tests of the reconciler, the recorder and the projection: the vault's
 * repositories, the object store, and the Kubernetes API the controllers see (RunApi,
 * ProjectionApi). They keep the contracts the real ones document (claims insert-once, append order,
 * SSA field ownership per manager) and count every write, so a test can say "no write at all".
 * Real implementations are covered by the integration tests against PostgreSQL, MinIO and
 * kube-apiserver; these exist for the fast loop.
 */
import { randomUUID } from 'node:crypto';
import type { Run, RunStatus } from '../../src/crd/run.ts';
import type { BlobStore, StoredObject } from '../../src/blob/store.ts';
import type { RunApi } from '../../src/controller/run/reconciler.ts';
import type { ProjectionApi } from '../../src/controller/transparency/projection.ts';
import {
  lossFingerprint,
  mirroredStatus,
  VaultError,
  type AibomRecords,
  type ArtifactRecord,
  type AttestationSummary,
  type ClaimedAppendOptions,
  type Loss,
  type ManifestRepair,
  type NewLoss,
  type NewAttestation,
  type RepairedManifest,
  type RepairReason,
  type RunJob,
  type RunRecord,
  type StoredAttestation,
  type TransparencyJob,
} from '../../src/vault/index.ts';

/** Counts calls by name. */
export class Counter {
  readonly calls = new Map<string, number>();
  bump(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }
  total(): number {
    return [...this.calls.values()].reduce((a, b) => a + b, 0);
  }
  reset(): void {
    this.calls.clear();
  }
}

interface Row extends StoredAttestation {
  readonly record: NewAttestation;
}

/** The vault repositories the reconciler, the recorder and the projection use, in memory. */
export class FakeVault {
  readonly writes = new Counter();
  readonly rows: Row[] = [];
  readonly claimed = new Map<string, string[]>();
  readonly artifactRows = new Map<string, ArtifactRecord>();
  readonly mirrors = new Map<string, RunRecord>();
  readonly jobs = new Map<string, TransparencyJob>();
  /** Set to make the next vault call fail (once), like PostgreSQL going away. */
  failNext: Error | undefined;

  private check(): void {
    const err = this.failNext;
    this.failNext = undefined;
    if (err) throw err;
  }

  readonly runs = {
    upsert: async (run: Run): Promise<void> => {
      this.check();
      this.writes.bump('runs.upsert');
      const now = new Date();
      this.mirrors.set(run.metadata.uid, {
        id: run.metadata.uid,
        namespace: run.metadata.namespace,
        name: run.metadata.name,
        // What JSONB gives back: a copy, undefined members dropped.
        spec: JSON.parse(JSON.stringify(run.spec)) as RunRecord['spec'],
        status: JSON.parse(JSON.stringify(mirroredStatus(run))) as RunStatus,
        phase: run.status?.phase ?? null,
        createdAt: this.mirrors.get(run.metadata.uid)?.createdAt ?? now,
        updatedAt: now,
      });
      return Promise.resolve();
    },
    get: async (id: string): Promise<RunRecord | null> => {
      this.check();
      return Promise.resolve(this.mirrors.get(id) ?? null);
    },
    latest: async (namespace: string, name: string): Promise<RunRecord | null> => {
      this.check();
      const named = [...this.mirrors.values()].filter((r) => r.namespace === namespace && r.name === name);
      return Promise.resolve(named.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())[0] ?? null);
    },
  };

  readonly claims = {
    get: async (key: string): Promise<string[] | null> => {
      this.check();
      return Promise.resolve(this.claimed.get(key) ?? null);
    },
    getMany: async (keys: readonly string[]): Promise<Map<string, string[]>> => {
      this.check();
      return Promise.resolve(
        new Map(keys.flatMap((k) => (this.claimed.has(k) ? [[k, this.claimed.get(k)!] as const] : []))),
      );
    },
    append: async (key: string, records: readonly NewAttestation[], options: ClaimedAppendOptions = {}) => {
      this.check();
      if (this.claimed.has(key)) throw new VaultError('CLAIM_TAKEN', `${key} is already recorded`);
      this.writes.bump('claims.append');
      const stored = records.map((r, i) => ({
        id: randomUUID(),
        seq: this.rows.length + i + 1,
        namespace: r.namespace,
        runId: r.runId ?? null,
        stepId: r.stepId ?? null,
        kind: r.kind,
        subjects: [...r.subjects],
        artifactDigests: [...(r.artifactDigests ?? [])],
        predicateType: r.predicateType,
        policyPack: r.policyPack ?? null,
        policyVersion: r.policyVersion ?? null,
        capabilityTokenIds: [...(r.capabilityTokenIds ?? [])],
        envelope: r.envelope,
        digest: r.digest,
        prevDigest: '',
        signature: r.signature,
        c2paManifestRef: r.c2paManifestRef ?? null,
        createdAt: new Date(),
      }));
      for (const [i, s] of stored.entries()) {
        this.rows.push({ ...s, record: records[i]! });
        if (options.enqueueTransparency) this.jobs.set(s.id, queuedJob(s.id));
      }
      this.claimed.set(
        key,
        stored.map((s) => s.id),
      );
      if (options.artifact) {
        const a = options.artifact(stored);
        const k = `${a.runId}/${a.kind}`;
        if (!this.artifactRows.has(k)) this.artifactRows.set(k, { ...a, createdAt: new Date(), repairs: [] });
      }
      return Promise.resolve(stored);
    },
  };

  readonly artifacts = {
    get: async (runId: string, kind: string): Promise<ArtifactRecord | null> => {
      this.check();
      return Promise.resolve(this.artifactRows.get(`${runId}/${kind}`) ?? null);
    },
  };

  readonly attestations = {
    ofRun: async (namespace: string, runId: string): Promise<AttestationSummary[]> => {
      this.check();
      return Promise.resolve(
        this.rows
          .filter((r) => r.runId === runId && r.namespace === namespace)
          .map(({ id, kind, predicateType, subjects, digest }) => ({
            id,
            kind,
            predicateType,
            subjects,
            digest,
          })),
      );
    },
    aibomInputs: async (runId: string): Promise<AibomRecords> => {
      this.check();
      const ofRun = this.rows.filter((r) => r.runId === runId);
      const aibom = ofRun.findIndex((r) => r.kind === 'aibom');
      const listed = aibom === -1 ? ofRun : ofRun.slice(0, aibom);
      return Promise.resolve({
        ids: listed.map((r) => r.id),
        steps: listed.flatMap((r) => (r.kind === 'step' && r.record.stepId != null ? [r.record.stepId] : [])),
      });
    },
    getMany: async (ids: readonly string[]): Promise<Map<string, StoredAttestation>> => {
      this.check();
      const wanted = new Set(ids);
      return Promise.resolve(
        new Map(this.rows.filter((r) => wanted.has(r.id)).map((r) => [r.id, r] as const)),
      );
    },
  };

  /** vault_losses rows, by fingerprint (src/vault/losses.ts). */
  readonly lossRows = new Map<string, Loss>();

  readonly losses = {
    record: async (loss: NewLoss): Promise<{ loss: Loss; created: boolean }> => {
      this.check();
      const fingerprint = lossFingerprint(loss.identity);
      const stored = this.lossRows.get(fingerprint);
      if (stored) return Promise.resolve({ loss: stored, created: false });
      this.writes.bump('losses.record');
      const row: Loss = {
        id: randomUUID(),
        scope: loss.scope,
        fingerprint,
        namespace: loss.namespace ?? null,
        runId: loss.runId ?? null,
        missingIds: [...loss.missingIds],
        details: loss.details,
        detectedBy: loss.detectedBy,
        detectedAt: new Date(),
      };
      this.lossRows.set(fingerprint, row);
      return Promise.resolve({ loss: row, created: true });
    },
  };

  /** The audit entries the vault wrote (manifest repairs). */
  readonly audit: { action: string; manifestDigest: string | null }[] = [];

  readonly manifestRepairs = {
    complete: async (
      id: string,
      manifest: RepairedManifest,
      _audit: { actor: string; namespace: string; object: string; attestationIds: readonly string[] },
    ): Promise<ManifestRepair | null> => {
      this.check();
      this.writes.bump('manifestRepairs.complete');
      const done = this.updateRepair(id, (r) => ({
        ...r,
        state: 'done',
        manifestKey: manifest.key,
        manifestDigest: manifest.digest,
        manifestLabel: manifest.label,
        attempts: r.attempts + 1,
        completedAt: new Date(),
      }));
      if (done) this.audit.push({ action: 'manifest.repair.completed', manifestDigest: manifest.digest });
      return Promise.resolve(done);
    },
    fail: async (
      id: string,
      outcome: { error: string; final: boolean; delayMs: number },
    ): Promise<ManifestRepair | null> => {
      this.check();
      this.writes.bump('manifestRepairs.fail');
      return Promise.resolve(
        this.updateRepair(id, (r) => ({
          ...r,
          state: outcome.final ? 'failed' : 'queued',
          attempts: r.attempts + 1,
          lastError: outcome.error,
          nextAttemptAt: new Date(Date.now() + outcome.delayMs),
          completedAt: outcome.final ? new Date() : null,
        })),
      );
    },
  };

  /** Opens a repair request for an artifact, as the API does when a download finds the manifest wanting. */
  requestRepair(runId: string, reason: RepairReason): ManifestRepair {
    const k = `${runId}/aibom`;
    const a = this.artifactRows.get(k);
    if (!a) throw new Error(`no artifact ${k}`);
    const manifest = a.metadata.c2pa_manifest as { key: string; digest: string };
    const now = new Date();
    const repair: ManifestRepair = {
      id: randomUUID(),
      runId,
      kind: 'aibom',
      reason,
      detail: '',
      replacesKey: manifest.key,
      replacesDigest: manifest.digest,
      requestedBy: 'alice',
      state: 'queued',
      attempts: 0,
      lastError: null,
      nextAttemptAt: now,
      manifestKey: null,
      manifestDigest: null,
      manifestLabel: null,
      requestedAt: now,
      completedAt: null,
    };
    this.artifactRows.set(k, { ...a, repairs: [...a.repairs, repair] });
    this.audit.push({ action: 'manifest.repair.requested', manifestDigest: manifest.digest });
    return repair;
  }

  private updateRepair(id: string, f: (r: ManifestRepair) => ManifestRepair): ManifestRepair | null {
    for (const [k, a] of this.artifactRows) {
      const i = a.repairs.findIndex((r) => r.id === id && r.state === 'queued');
      if (i === -1) continue;
      const next = f(a.repairs[i]!);
      this.artifactRows.set(k, { ...a, repairs: a.repairs.map((r, j) => (j === i ? next : r)) });
      return next;
    }
    return null;
  }

  readonly transparencyJobs = {
    get: async (key: { id: string } | { attestationId: string }): Promise<TransparencyJob | null> => {
      this.check();
      if ('attestationId' in key) return Promise.resolve(this.jobs.get(key.attestationId) ?? null);
      return Promise.resolve([...this.jobs.values()].find((j) => j.id === key.id) ?? null);
    },
    forRun: async (
      runId: string,
    ): Promise<{ run: { namespace: string; name: string } | null; jobs: RunJob[]; records: number }> => {
      this.check();
      const mirror = this.mirrors.get(runId);
      if (!mirror) return Promise.resolve({ run: null, jobs: [], records: 0 });
      const jobs = this.rows.flatMap((r) => {
        const job = r.runId === runId ? this.jobs.get(r.id) : undefined;
        return job ? [{ attestationId: r.id, kind: r.kind, job }] : [];
      });
      const records = this.rows.filter((r) => r.runId === runId).length;
      return Promise.resolve({ run: { namespace: mirror.namespace, name: mirror.name }, jobs, records });
    },
  };

  /** Moves a job on, as a worker would. */
  publish(attestationId: string, patch: Partial<TransparencyJob>): void {
    const job = this.jobs.get(attestationId);
    if (!job) throw new Error(`no job for ${attestationId}`);
    this.jobs.set(attestationId, { ...job, ...patch, updatedAt: new Date() });
  }
}

function queuedJob(attestationId: string): TransparencyJob {
  const now = new Date();
  return {
    id: randomUUID(),
    attestationId,
    state: 'queued',
    attempts: 0,
    lastError: null,
    nextAttemptAt: now,
    leaseToken: null,
    statement: null,
    entryId: null,
    logIndex: null,
    receipt: null,
    backend: null,
    publishedAt: null,
    createdAt: now,
    updatedAt: now,
  };
}

/** An object store in memory. */
export class FakeBlobs implements BlobStore {
  readonly bucket = 'fake-bucket';
  readonly objects = new Map<string, { body: Buffer; metadata: Record<string, string> }>();
  readonly writes = new Counter();
  /** Set to make the next call fail (once), like MinIO going away. */
  failNext: Error | undefined;

  private check(): void {
    const err = this.failNext;
    this.failNext = undefined;
    if (err) throw err;
  }

  put(key: string, body: Buffer, _type: string, metadata: Record<string, string> = {}): Promise<void> {
    this.check();
    this.writes.bump('put');
    this.objects.set(key, { body: Buffer.from(body), metadata });
    return Promise.resolve();
  }
  get(key: string): Promise<Buffer | null> {
    this.check();
    return Promise.resolve(this.objects.get(key)?.body ?? null);
  }
  stat(key: string): Promise<StoredObject | null> {
    this.check();
    const o = this.objects.get(key);
    return Promise.resolve(o ? { key, size: o.body.length, etag: 'fake', metadata: o.metadata } : null);
  }
  list(prefix: string): Promise<string[]> {
    this.check();
    return Promise.resolve([...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort());
  }
  delete(key: string): Promise<void> {
    this.check();
    this.writes.bump('delete');
    this.objects.delete(key);
    return Promise.resolve();
  }
  ping(): Promise<void> {
    return Promise.resolve();
  }
}

const clone = <T>(v: T): T => structuredClone(v);

/**
 * The Kubernetes side of one namespace in memory: Runs (with the status fields each SSA field
 * manager owns, merged the way the API server merges them), Attestation resources and Events.
 * `cached` reads what the last write left (an informer that is up to date); counts requests by verb.
 */
export class FakeKube {
  readonly requests = new Counter();
  readonly runs = new Map<string, Run>();
  readonly attestations = new Map<
    string,
    { runName: string; summary: AttestationSummary; status: Record<string, unknown> }
  >();
  readonly events: { reason: string; type: string; note: string }[] = [];
  /** Per field manager, the status it last applied to each Run (SSA: its complete desired state). */
  private readonly applied = new Map<string, Map<string, RunStatus>>();
  /** Every AIBOMReady condition the controller applied, per Run key, in order (what a watch sees). */
  private readonly history = new Map<string, { status: string; reason: string }[]>();
  private rv = 1;

  /** The AIBOMReady conditions the controller applied to `run`, in order. */
  statusHistory(run: Run): { status: string; reason: string }[] {
    return [...(this.history.get(this.key(run.metadata.namespace, run.metadata.name)) ?? [])];
  }

  private key(ns: string, name: string): string {
    return `${ns}/${name}`;
  }

  /** Creates a Run, or replaces its spec and pipeline fields (`status.phase`, `status.steps`), as a pipeline would. */
  put(run: Run): Run {
    const k = this.key(run.metadata.namespace, run.metadata.name);
    const old = this.runs.get(k);
    const stored = clone({
      ...run,
      metadata: {
        ...run.metadata,
        ...(old?.metadata.finalizers ? { finalizers: old.metadata.finalizers } : {}),
        generation: run.metadata.generation ?? 1,
        resourceVersion: String(this.rv++),
      },
    });
    this.runs.set(k, stored);
    this.rebuild(k);
    return clone(this.runs.get(k)!);
  }

  run(ns: string, name: string): Run | undefined {
    const r = this.runs.get(this.key(ns, name));
    return r ? clone(r) : undefined;
  }

  /** SSA of `status` by `manager`: fields other managers own stay; this manager's are replaced. */
  private apply(manager: string, run: Run, status: RunStatus): void {
    const k = this.key(run.metadata.namespace, run.metadata.name);
    if (!this.runs.has(k)) throw Object.assign(new Error('not found'), { code: 404 });
    const mine = this.applied.get(manager) ?? new Map<string, RunStatus>();
    mine.set(k, clone(status));
    this.applied.set(manager, mine);
    this.rebuild(k);
    this.runs.get(k)!.metadata.resourceVersion = String(this.rv++);
  }

  /** The pipeline's fields, then every manager's last applied fields, deep-merged (maps merge). */
  private rebuild(k: string): void {
    const current = this.runs.get(k)!;
    let merged: Record<string, unknown> = {};
    if (current.status?.phase !== undefined) merged.phase = current.status.phase;
    if (current.status?.steps !== undefined) merged.steps = current.status.steps;
    for (const m of this.applied.values()) {
      const s = m.get(k);
      if (s) merged = deepMerge(merged, s as Record<string, unknown>);
    }
    current.status = merged;
  }

  runApi(): RunApi {
    return {
      cached: (ns, name) => this.run(ns, name) ?? null,
      live: (ns, name) => {
        this.requests.bump('GET run');
        return Promise.resolve(this.run(ns, name) ?? null);
      },
      addFinalizer: (run) => {
        // As src/kube/status.ts: the Run as given when it carries the finalizer (no request).
        if ((run.metadata.finalizers ?? []).includes('vault.service.dev/aibom'))
          return Promise.resolve(clone(run));
        const current = this.runs.get(this.key(run.metadata.namespace, run.metadata.name))!;
        if ((current.metadata.finalizers ?? []).includes('vault.service.dev/aibom'))
          return Promise.resolve(clone(current));
        this.requests.bump('PATCH run');
        current.metadata.finalizers = [...(current.metadata.finalizers ?? []), 'vault.service.dev/aibom'];
        current.metadata.resourceVersion = String(this.rv++);
        return Promise.resolve(clone(current));
      },
      removeFinalizer: (run) => {
        this.requests.bump('PATCH run');
        const current = this.runs.get(this.key(run.metadata.namespace, run.metadata.name))!;
        current.metadata.finalizers = (current.metadata.finalizers ?? []).filter(
          (f) => f !== 'vault.service.dev/aibom',
        );
        return Promise.resolve();
      },
      applyStatus: (run, status) => {
        this.requests.bump('PATCH runs/status');
        const c = status.conditions?.find((x) => x.type === 'AIBOMReady');
        if (c) {
          const k = this.key(run.metadata.namespace, run.metadata.name);
          this.history.set(k, [...(this.history.get(k) ?? []), { status: c.status, reason: c.reason }]);
        }
        this.apply('controller', run, status);
        return Promise.resolve();
      },
      attestationIds: (run) => {
        this.requests.bump('LIST attestations');
        return Promise.resolve(
          new Set(
            [...this.attestations].filter(([, a]) => a.runName === run.metadata.name).map(([id]) => id),
          ),
        );
      },
      deleteAttestation: (_run, id) => {
        this.requests.bump('DELETE attestations');
        this.attestations.delete(id);
        return Promise.resolve();
      },
      applyAttestationRecords: (_run, id, records) => {
        this.requests.bump('PATCH attestations/status');
        const a = this.attestations.get(id);
        if (a) a.status = { ...a.status, records };
        return Promise.resolve();
      },
      createAttestation: (run, summary) => {
        this.requests.bump('POST attestations');
        if (!this.attestations.has(summary.id))
          this.attestations.set(summary.id, { runName: run.metadata.name, summary, status: {} });
        return Promise.resolve();
      },
      event: (_run, type, reason, note) => {
        this.requests.bump('POST events');
        this.events.push({ type, reason, note });
        return Promise.resolve();
      },
    };
  }

  projectionApi(): ProjectionApi {
    return {
      cached: (ns, name) => this.run(ns, name) ?? null,
      attestationTransparency: (run) => {
        this.requests.bump('LIST attestations');
        return Promise.resolve(
          new Map(
            [...this.attestations]
              .filter(([, a]) => a.runName === run.metadata.name)
              .map(([id, a]) => [id, clone(a.status.transparency)]),
          ),
        );
      },
      applyAttestationTransparency: (_run, id, transparency) => {
        this.requests.bump('PATCH attestations/status');
        const a = this.attestations.get(id)!;
        // Another field manager's fields (the reconciler's `records`) stay, as with server-side apply.
        a.status = { ...a.status, transparency: clone(transparency) };
        return Promise.resolve();
      },
      applyRunTransparency: (run, status) => {
        this.requests.bump('PATCH runs/status');
        this.apply('transparency', run, status);
        return Promise.resolve();
      },
      event: (_run, type, reason, note) => {
        this.requests.bump('POST events');
        this.events.push({ type, reason, note });
        return Promise.resolve();
      },
    };
  }
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    // `conditions` is a list-map keyed by `type` in the CRD: each manager owns its own entries.
    if (k === 'conditions' && Array.isArray(prev) && Array.isArray(v)) {
      const types = new Set((v as { type: string }[]).map((c) => c.type));
      out[k] = [
        ...(prev as { type: string }[]).filter((c) => !types.has(c.type)),
        ...clone(v as { type: string }[]),
      ];
      continue;
    }
    out[k] = isMap(prev) && isMap(v) ? deepMerge(prev, v) : clone(v);
  }
  return out;
}

const isMap = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1Container,
  V1Deployment,
  V1EnvVar,
  V1PodDisruptionBudget,
  V1Role,
  V1RoleBinding,
  V1Service,
} from '@kubernetes/client-node';
import { extract } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../hack/stack/stack.ts';
import { schema } from '../../src/config/schema.ts';
import { stack, uniqueName } from '../helpers/stack.ts';

/**
 * The Helm chart, checked with the pinned helm v4 and the stack's real kube-apiserver: it lints,
 * renders with default and with production-like values, every rendered object the stack can know
 * (all but the cert-manager and Prometheus Operator kinds) passes server-side validation and the
 * restricted Pod Security Standard, the CRDs it ships are byte for byte those of crds/, and its
 * RBAC is the RBAC of manifests/rbac.yaml.
 */

const chartDir = join(repoRoot, 'charts/aibom-vault');

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

interface Out {
  stdout: string;
  stderr: string;
}

let helmHome: string;

/** Runs a binary, optionally feeding stdin; rejects with its stderr on a non-zero exit. */
function exec(command: string, args: readonly string[], input?: string): Promise<Out> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: {
        ...process.env,
        // helm keeps its cache/config/data here, not in the user's home.
        HELM_CACHE_HOME: join(helmHome, 'cache'),
        HELM_CONFIG_HOME: join(helmHome, 'config'),
        HELM_DATA_HOME: join(helmHome, 'data'),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}\n${stderr}\n${stdout}`));
    });
    child.stdin.end(input ?? '');
  });
}

const helm = (...args: string[]): Promise<Out> => exec(stack().tools.helm, args);
const kubectl = (args: string[], input?: string): Promise<Out> =>
  exec(stack().tools.kubectl, [`--kubeconfig=${stack().kube.kubeconfigs.admin}`, ...args], input);

function parseObjects(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => {
      expect(doc.errors, String(doc.errors[0])).toEqual([]);
      return doc.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

async function template(
  release: string,
  namespace: string,
  sets: readonly string[] = [],
): Promise<K8sObject[]> {
  const { stdout } = await helm(
    'template',
    release,
    chartDir,
    '--namespace',
    namespace,
    ...sets.flatMap((s) => ['--set', s]),
  );
  return parseObjects(stdout);
}

function only<T>(objects: readonly K8sObject[], kind: string): T[] {
  return objects.filter((o) => o.kind === kind) as unknown as T[];
}

function one<T>(objects: readonly K8sObject[], kind: string): T {
  const found = only<T>(objects, kind);
  expect(found, kind).toHaveLength(1);
  return found[0]!;
}

const envOf = (c: V1Container, name: string): V1EnvVar | undefined => c.env?.find((e) => e.name === name);

/** Every variable is a key of src/config/schema.ts (a typo would be silently ignored by the process). */
function expectSchemaEnv(deployment: V1Deployment): void {
  for (const c of deployment.spec!.template.spec!.containers) {
    for (const e of c.env ?? []) expect(Object.keys(schema), `${c.name} env ${e.name}`).toContain(e.name);
  }
}

/** Production-like values: several replicas, cert-manager signer, ServiceMonitor, dev Secrets. */
const FULL = [
  'replicas=3',
  'signer.certManager.enabled=true',
  'signer.certManager.selfSignedCA.create=true',
  'serviceMonitor.enabled=true',
  'transparency.writer=true',
  'transparency.logIssuer=https://aibom-vault.example.com',
  'database.url=postgres://vault:secret@postgres.db.svc:5432/vault',
  's3.endpoint=http://minio.minio.svc:9000',
  's3.accessKey=vault',
  's3.secretKey=secret-key',
] as const;

/** Kinds whose CRDs (cert-manager, Prometheus Operator) the test API server does not have. */
const FOREIGN_GROUPS = ['cert-manager.io/', 'monitoring.coreos.com/'];

beforeAll(async () => {
  helmHome = await mkdtemp(join(tmpdir(), 'helm-test-'));
});

afterAll(async () => {
  await rm(helmHome, { recursive: true, force: true });
});

describe('helm chart charts/aibom-vault', () => {
  it('passes helm lint --strict with default and with production-like values', async () => {
    const plain = await helm('lint', '--strict', chartDir);
    expect(plain.stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    const full = await helm('lint', '--strict', chartDir, ...FULL.flatMap((s) => ['--set', s]));
    expect(full.stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('renders one Deployment with the controller and the sidecar, configured from the schema', async () => {
    const objects = await template('aibom-vault', 'aibom-vault-system');
    expect(new Set(objects.map((o) => o.kind))).toEqual(
      new Set([
        'ServiceAccount',
        'ClusterRole',
        'ClusterRoleBinding',
        'Role',
        'RoleBinding',
        'Service',
        'Deployment',
      ]),
    );
    const deployment = one<V1Deployment>(objects, 'Deployment');
    expect(deployment.spec?.replicas).toBe(1);
    const pod = deployment.spec!.template.spec!;
    expect(pod.serviceAccountName).toBe('aibom-vault');
    const [controller, sidecar] = pod.containers;
    expect(pod.containers.map((c) => c.name)).toEqual(['controller', 'sidecar']);
    expect(controller!.image).toBe(sidecar!.image);
    expect(controller!.command).toEqual(['controller']);
    expect(sidecar!.command).toEqual(['sidecar']);
    // The commands are the image's entry points: the package's bins.
    const pkg = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
    };
    expect(Object.keys(pkg.bin)).toEqual(expect.arrayContaining(['controller', 'sidecar', 'service-ctl']));
    // ... which the Dockerfile puts on PATH under those names.
    const dockerfile = await readFile(join(repoRoot, 'Dockerfile'), 'utf8');
    for (const [name, path] of Object.entries(pkg.bin)) {
      expect(dockerfile, name).toContain(`ln -s /app/${path} /usr/local/bin/${name}`);
    }

    expectSchemaEnv(deployment);
    for (const c of [controller!, sidecar!]) {
      expect(envOf(c, 'SERVICE_REQUIRE_SIGNED_EXPORTS')?.value).toBe('1');
      expect(envOf(c, 'SERVICE_TRANSPARENCY_WRITER')?.value).toBe('0');
      expect(envOf(c, 'SCITT_BACKEND')?.value).toBe('local');
      expect(envOf(c, 'SIGNER_SECRET')?.value).toBe('aibom-vault-signer');
      expect(envOf(c, 'LEADER_ELECTION_LEASE')?.value).toBe('aibom-vault-controller');
      expect(envOf(c, 'DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({
        name: 'aibom-vault-database',
        key: 'DATABASE_URL',
      });
      for (const key of ['S3_ENDPOINT', 'S3_ACCESS_KEY', 'S3_SECRET_KEY']) {
        expect(envOf(c, key)?.valueFrom?.secretKeyRef, key).toEqual({ name: 'aibom-vault-s3', key });
      }
      expect(envOf(c, 'POD_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
      expect(envOf(c, 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
      // Secrets never appear as plain values.
      for (const key of Object.keys(schema).filter((k) => 'secret' in schema[k as keyof typeof schema])) {
        expect(envOf(c, key)?.value, key).toBeUndefined();
      }
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(c.resources?.requests).toBeDefined();
      expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
      expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
      expect(c.livenessProbe?.httpGet?.port).toBe(c.ports![0]!.name);
      expect(c.readinessProbe?.httpGet?.port).toBe(c.ports![0]!.name);
    }
    expect(envOf(controller!, 'METRICS_PORT')?.value).toBe('9090');
    expect(controller!.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(envOf(sidecar!, 'HTTP_PORT')?.value).toBe('8080');
    expect(sidecar!.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'api-metrics', containerPort: 9091, protocol: 'TCP' },
    ]);
    // Two containers in one pod: their ops ports must differ.
    expect(envOf(sidecar!, 'METRICS_PORT')?.value).toBe('9091');
    expect(envOf(controller!, 'METRICS_PORT')?.value).not.toBe(envOf(sidecar!, 'METRICS_PORT')?.value);

    const service = one<V1Service>(objects, 'Service');
    expect(service.spec?.ports?.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['http', 8080, 'http'],
      ['metrics', 9090, 'metrics'],
    ]);
    expect(service.spec?.selector).toEqual(deployment.spec?.selector.matchLabels);
    expect(deployment.spec?.template.metadata?.labels).toMatchObject(deployment.spec!.selector.matchLabels!);
  });

  it('renders with replicas=3, a cert-manager signer and a ServiceMonitor', async () => {
    const objects = await template('vault', 'tenant-infra', FULL);
    const deployment = one<V1Deployment>(objects, 'Deployment');
    expect(deployment.spec?.replicas).toBe(3);
    expectSchemaEnv(deployment);
    const pod = deployment.spec!.template.spec!;
    for (const c of pod.containers) {
      expect(envOf(c, 'SERVICE_TRANSPARENCY_WRITER')?.value).toBe('1');
      expect(envOf(c, 'SCITT_LOG_ISSUER')?.value).toBe('https://aibom-vault.example.com');
    }

    const pdb = one<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget');
    expect(pdb.spec?.maxUnavailable).toBe(1);
    expect(deployment.spec?.template.metadata?.labels).toMatchObject(pdb.spec!.selector!.matchLabels!);
    expect(pod.affinity?.podAntiAffinity).toBeDefined();

    // The signer Certificate issues exactly the Secret the processes load.
    const certificates = only<K8sObject & { spec: Record<string, unknown> }>(objects, 'Certificate');
    const leaf = certificates.find((c) => c.spec.isCA === false)!;
    expect(leaf.spec.secretName).toBe(envOf(pod.containers[0]!, 'SIGNER_SECRET')?.value);
    expect(leaf.spec.privateKey).toMatchObject({ algorithm: 'ECDSA', size: 256, encoding: 'PKCS8' });
    expect(leaf.spec.usages).toEqual(expect.arrayContaining(['digital signature', 'email protection']));
    const ca = certificates.find((c) => c.spec.isCA === true)!;
    const issuers = only<K8sObject & { spec: Record<string, unknown> }>(objects, 'Issuer');
    expect(leaf.spec.issuerRef).toMatchObject({ kind: 'Issuer', name: ca.spec.secretName });
    expect(issuers.find((i) => i.metadata.name === ca.spec.secretName)?.spec.ca).toEqual({
      secretName: ca.spec.secretName,
    });

    const monitor = one<K8sObject & { spec: { endpoints: { port: string; path: string }[] } }>(
      objects,
      'ServiceMonitor',
    );
    const service = one<V1Service>(objects, 'Service');
    expect(monitor.spec.endpoints).toMatchObject([{ port: 'metrics', path: '/metrics' }]);
    expect(service.spec?.ports?.map((p) => p.name)).toContain('metrics');
    expect(only<K8sObject>(objects, 'Secret').map((s) => s.metadata.name)).toEqual([
      'vault-aibom-vault-database',
      'vault-aibom-vault-s3',
    ]);
  });

  it('configures a remote SCRAPI transparency service, its token from a Secret', async () => {
    const objects = await template('aibom-vault', 'aibom-vault-system', [
      'transparency.backend=scrapi',
      'transparency.url=https://scitt.example.com',
      'transparency.token.secretName=scitt-token',
    ]);
    const deployment = one<V1Deployment>(objects, 'Deployment');
    expectSchemaEnv(deployment);
    for (const c of deployment.spec!.template.spec!.containers) {
      expect(envOf(c, 'SCITT_BACKEND')?.value).toBe('scrapi');
      expect(envOf(c, 'SCITT_URL')?.value).toBe('https://scitt.example.com');
      expect(envOf(c, 'SCITT_TOKEN')?.valueFrom?.secretKeyRef).toEqual({
        name: 'scitt-token',
        key: 'SCITT_TOKEN',
      });
    }
  });

  it('refuses incomplete values', async () => {
    await expect(template('x', 'y', ['signer.certManager.enabled=true'])).rejects.toThrow(
      /signer.certManager.issuerRef.name is required/,
    );
    await expect(template('x', 'y', ['transparency.backend=scrapi'])).rejects.toThrow(/transparency.url/);
    await expect(template('x', 'y', ['requireSignedExports=maybe'])).rejects.toThrow(/requireSignedExports/);
  });

  it.each([
    ['default values', [] as readonly string[]],
    ['replicas=3 + cert-manager + ServiceMonitor', FULL],
  ])(
    'is accepted by the real API server (dry-run=server) under the restricted Pod Security Standard: %s',
    async (_label, sets) => {
      const ns = uniqueName('helm');
      await kubectl(['create', 'namespace', ns]);
      // Warn mode checks the pod templates of workload objects (enforce only applies to Pods).
      await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted']);
      try {
        const objects = (await template(uniqueName('rel'), ns, sets)).filter(
          (o) => !FOREIGN_GROUPS.some((g) => o.apiVersion.startsWith(g)),
        );
        const input = objects.map((o) => JSON.stringify(o)).join('\n');
        const { stdout, stderr } = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], input);
        const accepted = stdout.trim().split('\n');
        expect(accepted, stdout).toHaveLength(objects.length);
        for (const line of accepted) expect(line).toMatch(/ created \(server dry run\)$/);
        expect(stderr).not.toMatch(/PodSecurity|[Ww]arning/);
      } finally {
        await kubectl(['delete', 'namespace', ns, '--wait=false']);
      }
    },
  );

  it('(control) the same check does catch a pod template that breaks the restricted standard', async () => {
    const ns = uniqueName('helm');
    await kubectl(['create', 'namespace', ns]);
    await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted']);
    try {
      const objects = await template(uniqueName('rel'), ns, [
        'securityContext.allowPrivilegeEscalation=true',
      ]);
      const deployment = JSON.stringify(one<V1Deployment>(objects, 'Deployment'));
      const { stderr } = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], deployment);
      expect(stderr).toMatch(/would violate PodSecurity "restricted:.*allowPrivilegeEscalation/);
    } finally {
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    }
  });

  it('ships the CRDs of crds/ byte for byte', async () => {
    const out = await mkdtemp(join(tmpdir(), 'helm-package-'));
    try {
      await helm('package', chartDir, '--destination', out);
      const [tgz] = await readdir(out);
      const packaged = new Map<string, Buffer>();
      const entries = createReadStream(join(out, tgz!)).pipe(createGunzip()).pipe(extract());
      for await (const entry of entries) {
        const chunks: Buffer[] = [];
        for await (const chunk of entry) chunks.push(chunk as Buffer);
        const m = /^aibom-vault\/crds\/([^/]+)$/.exec(entry.header.name);
        if (m) packaged.set(m[1]!, Buffer.concat(chunks));
      }
      const sources = (await readdir(join(repoRoot, 'crds'))).filter((f) => f.endsWith('.yaml')).sort();
      expect(sources.length).toBeGreaterThanOrEqual(2);
      expect([...packaged.keys()].sort()).toEqual(sources);
      for (const f of sources) {
        expect(packaged.get(f)!.equals(await readFile(join(repoRoot, 'crds', f))), f).toBe(true);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it('renders the RBAC of manifests/rbac.yaml', async () => {
    const manifest = parseObjects(await readFile(join(repoRoot, 'manifests/rbac.yaml'), 'utf8'));
    // Released as in the manifest (name aibom-vault, namespace aibom-vault-system), names coincide.
    const chart = await template('aibom-vault', 'aibom-vault-system');

    const rules = (objects: K8sObject[], kind: 'ClusterRole' | 'Role'): Map<string, unknown> =>
      new Map(only<V1ClusterRole | V1Role>(objects, kind).map((r) => [r.metadata!.name!, r.rules]));
    for (const kind of ['ClusterRole', 'Role'] as const) {
      const expected = rules(manifest, kind);
      expect(expected.size, kind).toBeGreaterThan(0);
      expect(rules(chart, kind), kind).toEqual(expected);
    }
    expect([...rules(chart, 'ClusterRole').keys()].sort()).toEqual([
      'aibom-vault-auditor',
      'aibom-vault-controller',
      'aibom-vault-viewer',
    ]);

    const bindings = (objects: K8sObject[]): Map<string, unknown> =>
      new Map(
        [
          ...only<V1ClusterRoleBinding>(objects, 'ClusterRoleBinding'),
          ...only<V1RoleBinding>(objects, 'RoleBinding'),
        ].map((b) => [`${b.kind}/${b.metadata!.name}`, { roleRef: b.roleRef, subjects: b.subjects }]),
      );
    expect(bindings(chart)).toEqual(bindings(manifest));

    const label = 'rbac.authorization.k8s.io/aggregate-to-view';
    const aggregated = (objects: K8sObject[]): string[] =>
      only<V1ClusterRole>(objects, 'ClusterRole')
        .filter((r) => r.metadata?.labels?.[label] === 'true')
        .map((r) => r.metadata!.name!);
    expect(aggregated(chart)).toEqual(aggregated(manifest));
  });
});

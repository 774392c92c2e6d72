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
 * renders with default and with production-like values, its strict schema refuses typos and bad
 * types, every rendered object the stack can know (all but the cert-manager and Prometheus
 * Operator kinds) passes server-side validation and the restricted Pod Security Standard, the CRDs
 * it renders are those of crds/, its RBAC is the RBAC of manifests/rbac.yaml, and a release is
 * installed, upgraded from the previous chart version and uninstalled against the API server.
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
/** helm against the stack's API server, as its admin. */
const helmK = (...args: string[]): Promise<Out> =>
  exec(stack().tools.helm, [...args, `--kubeconfig=${stack().kube.kubeconfigs.admin}`]);
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
  extra: readonly string[] = [],
): Promise<K8sObject[]> {
  const { stdout } = await helm(
    'template',
    release,
    chartDir,
    '--namespace',
    namespace,
    ...sets.flatMap((s) => ['--set', s]),
    ...extra,
  );
  return parseObjects(stdout);
}

/** The cluster capability the ServiceMonitor needs, as `helm template` is told about it. */
const WITH_PROMETHEUS_OPERATOR = ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'] as const;

/** The chart's Deployment of one component (controller or api). */
function deploymentOf(objects: readonly K8sObject[], component: 'controller' | 'api'): V1Deployment {
  const found = only<V1Deployment>(objects, 'Deployment').filter(
    (d) => d.metadata?.labels?.['app.kubernetes.io/component'] === component,
  );
  expect(found, component).toHaveLength(1);
  return found[0]!;
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

/** Production-like values: several replicas, PDBs, cert-manager signer, ServiceMonitor, dev Secrets. */
const FULL = [
  'controller.replicas=2',
  'sidecar.replicas=3',
  'podDisruptionBudget.enabled=true',
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

  it('renders a controller Deployment and an API Deployment, each its own identity, configured from the schema', async () => {
    const objects = await template('aibom-vault', 'aibom-vault-system');
    expect(new Set(objects.map((o) => o.kind))).toEqual(
      new Set([
        'CustomResourceDefinition',
        'ServiceAccount',
        'ClusterRole',
        'ClusterRoleBinding',
        'Role',
        'RoleBinding',
        'Service',
        'Deployment',
        'PolicyPack',
      ]),
    );
    const controllerDeployment = deploymentOf(objects, 'controller');
    const apiDeployment = deploymentOf(objects, 'api');
    expect(controllerDeployment.metadata?.name).toBe('aibom-vault-controller');
    expect(apiDeployment.metadata?.name).toBe('aibom-vault-api');
    const pkg = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
    };
    for (const [deployment, process, sa] of [
      [controllerDeployment, 'controller', 'aibom-vault-controller'],
      [apiDeployment, 'sidecar', 'aibom-vault-api'],
    ] as const) {
      expect(deployment.spec?.replicas).toBe(1);
      const pod = deployment.spec!.template.spec!;
      expect(pod.serviceAccountName).toBe(sa);
      expect(pod.containers.map((c) => c.name)).toEqual([process]);
      const c = pod.containers[0]!;
      // The command is an entry point of the image: a bin of the package, on the image's PATH.
      expect(c.command).toEqual([process]);
      expect(Object.keys(pkg.bin)).toContain(process);
      expect(c.image).toBe('aibom-vault:0.1.0');
      expectSchemaEnv(deployment);
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
      for (const probe of [c.startupProbe, c.livenessProbe]) expect(probe?.httpGet?.path).toBe('/healthz');
      expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
      expect(deployment.spec?.template.metadata?.labels).toMatchObject(
        deployment.spec!.selector.matchLabels!,
      );
    }
    const controller = controllerDeployment.spec!.template.spec!.containers[0]!;
    const api = apiDeployment.spec!.template.spec!.containers[0]!;
    expect(envOf(controller, 'METRICS_PORT')?.value).toBe('9090');
    expect(controller.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(controller.readinessProbe?.httpGet?.port).toBe('metrics');
    expect(envOf(api, 'HTTP_PORT')?.value).toBe('8080');
    expect(envOf(api, 'METRICS_PORT')?.value).toBe('9091');
    expect(api.ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9091, protocol: 'TCP' },
    ]);
    expect(api.readinessProbe?.httpGet?.port).toBe('http');
    // /tmp, the only writable path: in memory for the controller; on disk for the API, whose
    // exports spool their .intoto.jsonl there (docs/export.md).
    for (const c of [controller, api])
      expect(c.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    expect(controllerDeployment.spec!.template.spec!.volumes).toContainEqual({
      name: 'tmp',
      emptyDir: { medium: 'Memory', sizeLimit: '64Mi' },
    });
    expect(apiDeployment.spec!.template.spec!.volumes).toContainEqual({
      name: 'tmp',
      emptyDir: { sizeLimit: '4Gi' },
    });
    // The two selectors are disjoint: neither Deployment adopts the other's pods.
    expect(controllerDeployment.spec?.selector.matchLabels).not.toEqual(
      apiDeployment.spec?.selector.matchLabels,
    );

    // Service <fullname> serves the API and the API's metrics; <fullname>-controller the controller's.
    const services = new Map(only<V1Service>(objects, 'Service').map((svc) => [svc.metadata!.name!, svc]));
    expect([...services.keys()].sort()).toEqual(['aibom-vault', 'aibom-vault-controller']);
    expect(services.get('aibom-vault')!.spec?.ports?.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['http', 8080, 'http'],
      ['metrics', 9090, 'metrics'],
    ]);
    expect(services.get('aibom-vault')!.spec?.selector).toEqual(apiDeployment.spec?.selector.matchLabels);
    expect(
      services.get('aibom-vault-controller')!.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
    ).toEqual([['metrics', 9090, 'metrics']]);
    expect(services.get('aibom-vault-controller')!.spec?.selector).toEqual(
      controllerDeployment.spec?.selector.matchLabels,
    );
    // No PDB and no ServiceMonitor unless asked for.
    expect(only(objects, 'PodDisruptionBudget')).toEqual([]);
    expect(only(objects, 'ServiceMonitor')).toEqual([]);
  });

  it('renders replicas per component, a PDB per Deployment, a cert-manager signer and a ServiceMonitor when the API exists', async () => {
    const objects = await template('vault', 'tenant-infra', FULL, WITH_PROMETHEUS_OPERATOR);
    const deployments = {
      controller: deploymentOf(objects, 'controller'),
      api: deploymentOf(objects, 'api'),
    };
    expect(deployments.controller.spec?.replicas).toBe(2);
    expect(deployments.api.spec?.replicas).toBe(3);
    for (const d of Object.values(deployments)) {
      expectSchemaEnv(d);
      const c = d.spec!.template.spec!.containers[0]!;
      expect(envOf(c, 'SERVICE_TRANSPARENCY_WRITER')?.value).toBe('1');
      expect(envOf(c, 'SCITT_LOG_ISSUER')?.value).toBe('https://aibom-vault.example.com');
      expect(d.spec!.template.spec!.affinity?.podAntiAffinity).toBeDefined();
    }
    const pdbs = only<V1PodDisruptionBudget>(objects, 'PodDisruptionBudget');
    expect(pdbs).toHaveLength(2);
    for (const [component, d] of Object.entries(deployments)) {
      const pdb = pdbs.find((p) => p.metadata?.name === `vault-aibom-vault-${component}`)!;
      expect(pdb.spec?.minAvailable).toBe(1);
      expect(pdb.spec?.selector?.matchLabels).toEqual(d.spec!.selector.matchLabels);
    }

    // The signer Certificate issues exactly the Secret the processes load.
    const pod = deployments.controller.spec!.template.spec!;
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

    // One ServiceMonitor scrapes port `metrics` of both Services (controller and API pods).
    const monitor = one<
      K8sObject & {
        spec: {
          selector: { matchLabels: Record<string, string> };
          endpoints: { port: string; path: string }[];
        };
      }
    >(objects, 'ServiceMonitor');
    expect(monitor.spec.endpoints).toMatchObject([{ port: 'metrics', path: '/metrics' }]);
    const services = only<V1Service>(objects, 'Service');
    expect(services).toHaveLength(2);
    for (const svc of services) {
      expect(svc.metadata?.labels, svc.metadata?.name).toMatchObject(monitor.spec.selector.matchLabels);
      expect(
        svc.spec?.ports?.map((p) => p.name),
        svc.metadata?.name,
      ).toContain('metrics');
    }
    expect(only<K8sObject>(objects, 'Secret').map((s) => s.metadata.name)).toEqual([
      'vault-aibom-vault-database',
      'vault-aibom-vault-s3',
    ]);
  });

  it('renders no ServiceMonitor where the cluster lacks the Prometheus Operator API (and says so)', async () => {
    const objects = await template('vault', 'tenant-infra', FULL);
    expect(only(objects, 'ServiceMonitor')).toEqual([]);
    const { stdout } = await helm(
      'install',
      'vault',
      chartDir,
      '--dry-run=client',
      '--namespace',
      'tenant-infra',
      ...FULL.flatMap((s) => ['--set', s]),
    );
    expect(stdout).toContain('does not serve monitoring.coreos.com/v1');
  });

  it('configures a remote SCRAPI transparency service, its token from a Secret', async () => {
    const objects = await template('aibom-vault', 'aibom-vault-system', [
      'transparency.backend=scrapi',
      'transparency.url=https://scitt.example.com',
      'transparency.token.secretName=scitt-token',
    ]);
    const deployments = only<V1Deployment>(objects, 'Deployment');
    expect(deployments).toHaveLength(2);
    for (const c of deployments.flatMap((d) => d.spec!.template.spec!.containers)) {
      expect(envOf(c, 'SCITT_BACKEND')?.value).toBe('scrapi');
      expect(envOf(c, 'SCITT_URL')?.value).toBe('https://scitt.example.com');
      expect(envOf(c, 'SCITT_TOKEN')?.valueFrom?.secretKeyRef).toEqual({
        name: 'scitt-token',
        key: 'SCITT_TOKEN',
      });
    }
  });

  it('configures witnessed logs: the note key for the controller alone, origin, witnesses as TLOG_WITNESSES parses them', async () => {
    const key = 'witness.example.org+1a2b3c4d+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const objects = await template('aibom-vault', 'aibom-vault-system', [
      'tlog.noteSecretName=vault-note',
      'tlog.origin=vault.example.com',
      'tlog.witnesses[0].url=https://witness.example.org/',
      `tlog.witnesses[0].key=${key}`,
      'tlog.witnesses[1].url=http://w2.example:8080',
      `tlog.witnesses[1].key=w2.example+00000000+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`,
      'tlog.public=true',
    ]);
    for (const c of only<V1Deployment>(objects, 'Deployment').flatMap(
      (d) => d.spec!.template.spec!.containers,
    )) {
      expect(envOf(c, 'TLOG_NOTE_SECRET')?.value).toBe('vault-note');
      expect(envOf(c, 'TLOG_ORIGIN')?.value).toBe('vault.example.com');
      expect(envOf(c, 'TLOG_PUBLIC')?.value).toBe('1');
      expect(schema.TLOG_WITNESSES.parse(envOf(c, 'TLOG_WITNESSES')!.value!)).toEqual([
        { url: 'https://witness.example.org', vkey: key },
        {
          url: 'http://w2.example:8080',
          vkey: 'w2.example+00000000+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        },
      ]);
    }
    const secretNames = (component: string) =>
      only<V1Role>(objects, 'Role')
        .filter((r) => r.metadata?.name === `aibom-vault-${component}`)
        .flatMap((r) => r.rules ?? [])
        .flatMap((r) => r.resourceNames ?? []);
    expect(secretNames('controller')).toContain('vault-note');
    expect(secretNames('api')).not.toContain('vault-note');
    await expect(
      template('x', 'y', ['tlog.witnesses[0].url=https://w.example', 'tlog.witnesses[0].key=nonsense']),
    ).rejects.toThrow(/tlog\/witnesses\/0\/key/);
    await expect(template('x', 'y', ['tlog.origin=https://vault.example.com'])).rejects.toThrow(
      /tlog\/origin/,
    );
  });

  it('configures an RFC 3161 time-stamping authority, its CA from a ConfigMap mounted read-only', async () => {
    const objects = await template('aibom-vault', 'aibom-vault-system', [
      'tsa.url=https://tsa.example.com/api/v1/timestamp',
      'tsa.caConfigMap=tsa-ca',
    ]);
    const deployments = only<V1Deployment>(objects, 'Deployment');
    expect(deployments).toHaveLength(2);
    for (const d of deployments) {
      const pod = d.spec!.template.spec!;
      for (const c of pod.containers) {
        expect(envOf(c, 'TSA_URL')?.value).toBe('https://tsa.example.com/api/v1/timestamp');
        expect(envOf(c, 'TSA_TRUST_ANCHORS')?.value).toBe('/etc/aibom-vault/tsa/ca.crt');
        expect(envOf(c, 'TSA_DEADLINE_MS')?.value).toBe('15000');
        expect(c.volumeMounts).toContainEqual({
          name: 'tsa-trust-anchors',
          mountPath: '/etc/aibom-vault/tsa',
          readOnly: true,
        });
      }
      expect(pod.volumes).toContainEqual({
        name: 'tsa-trust-anchors',
        configMap: { name: 'tsa-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
      });
    }
    const plain = await template('aibom-vault', 'aibom-vault-system');
    for (const c of only<V1Deployment>(plain, 'Deployment').flatMap(
      (d) => d.spec!.template.spec!.containers,
    )) {
      expect(envOf(c, 'TSA_URL')).toBeUndefined();
    }
    await expect(template('x', 'y', ['tsa.url=https://tsa.example.com'])).rejects.toThrow(/tsa.caConfigMap/);
  });

  it.each([
    ['a top-level typo', ['replica=3'], /additional properties 'replica' not allowed/],
    ['a nested typo', ['serviceMonitor.enable=true'], /additional properties 'enable' not allowed/],
    ['a string for tolerations', ['tolerations=bad'], /\/tolerations': got string, want array/],
    ['an unknown toleration effect', ['tolerations[0].effect=NoSched'], /tolerations\/0\/effect/],
    ['the removed replicas value', ['replicas=2'], /additional properties 'replicas' not allowed/],
    [
      'the removed PDB maxUnavailable',
      ['podDisruptionBudget.maxUnavailable=1'],
      /'maxUnavailable' not allowed/,
    ],
    ['a port out of range', ['sidecar.port=70000'], /\/sidecar\/port/],
    ['a /tmp size that is not a quantity', ['sidecar.tmp.sizeLimit=lots'], /\/sidecar\/tmp\/sizeLimit/],
    [
      'the API port on its metrics port',
      ['sidecar.port=9091'],
      /sidecar.port and sidecar.metricsPort are both 9091/,
    ],
    [
      'two Service ports alike',
      ['service.metricsPort=8080'],
      /service.port and service.metricsPort are both 8080/,
    ],
  ])('refuses %s', async (_label, sets, message) => {
    await expect(template('x', 'y', sets)).rejects.toThrow(message);
  });

  it('a managed environment (the default) enforces signed exports; only managed: false lets the admin turn them off', async () => {
    // Issue 22 item 10: SERVICE_REQUIRE_SIGNED_EXPORTS "default is on in managed environments".
    const flag = (objects: readonly K8sObject[]): string[] => [
      ...new Set(
        (['controller', 'api'] as const).flatMap((c) =>
          deploymentOf(objects, c).spec!.template.spec!.containers.map(
            (k) => envOf(k, 'SERVICE_REQUIRE_SIGNED_EXPORTS')?.value ?? '<unset>',
          ),
        ),
      ),
    ];
    expect(flag(await template('x', 'y'))).toEqual(['1']);
    expect(flag(await template('x', 'y', ['managed=true', 'requireSignedExports=true']))).toEqual(['1']);
    await expect(template('x', 'y', ['requireSignedExports=false'])).rejects.toThrow(
      /requireSignedExports: false is refused in a managed environment/,
    );
    expect(flag(await template('x', 'y', ['managed=false']))).toEqual(['1']);
    expect(flag(await template('x', 'y', ['managed=false', 'requireSignedExports=false']))).toEqual(['0']);
    await expect(template('x', 'y', ['managed=maybe'])).rejects.toThrow(/managed/);
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
    ['replicas, PDBs, cert-manager, ServiceMonitor', FULL],
  ])(
    'is accepted by the real API server (dry-run=server) under the restricted Pod Security Standard: %s',
    async (_label, sets) => {
      const ns = uniqueName('helm');
      await kubectl(['create', 'namespace', ns]);
      // Warn mode checks the pod templates of workload objects (enforce only applies to Pods).
      await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted']);
      try {
        // The CRDs exist in the stack already (their rendering is checked against crds/ below and
        // applied for real by the install test).
        const objects = (await template(uniqueName('rel'), ns, sets, WITH_PROMETHEUS_OPERATOR)).filter(
          (o) =>
            !FOREIGN_GROUPS.some((g) => o.apiVersion.startsWith(g)) && o.kind !== 'CustomResourceDefinition',
        );
        expect(only(objects, 'Deployment')).toHaveLength(2);
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
      const deployment = JSON.stringify(deploymentOf(objects, 'api'));
      const { stderr } = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], deployment);
      expect(stderr).toMatch(/would violate PodSecurity "restricted:.*allowPrivilegeEscalation/);
    } finally {
      await kubectl(['delete', 'namespace', ns, '--wait=false']);
    }
  });

  it('packages crds/ byte for byte and renders exactly those CRDs, kept on uninstall', async () => {
    const out = await mkdtemp(join(tmpdir(), 'helm-package-'));
    const sources = (await readdir(join(repoRoot, 'crds'))).filter((f) => f.endsWith('.yaml')).sort();
    expect(sources.length).toBeGreaterThanOrEqual(2);
    try {
      await helm('package', chartDir, '--destination', out);
      const [tgz] = await readdir(out);
      const packaged = new Map<string, Buffer>();
      const entries = createReadStream(join(out, tgz!)).pipe(createGunzip()).pipe(extract());
      for await (const entry of entries) {
        const chunks: Buffer[] = [];
        for await (const chunk of entry) chunks.push(chunk as Buffer);
        const m = /^aibom-vault\/files\/crds\/([^/]+)$/.exec(entry.header.name);
        if (m) packaged.set(m[1]!, Buffer.concat(chunks));
        // Helm installs (never upgrades) a chart's crds/ directory: the chart must not have one.
        expect(entry.header.name).not.toMatch(/^aibom-vault\/crds\//);
      }
      expect([...packaged.keys()].sort()).toEqual(sources);
      for (const f of sources) {
        expect(packaged.get(f)!.equals(await readFile(join(repoRoot, 'crds', f))), f).toBe(true);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
    const rendered = only<K8sObject>(
      await template('aibom-vault', 'aibom-vault-system'),
      'CustomResourceDefinition',
    );
    const strip = (o: K8sObject): unknown => {
      const {
        labels: _l,
        annotations: _a,
        ...metadata
      } = o.metadata as K8sObject['metadata'] & {
        annotations?: unknown;
      };
      return { ...o, metadata };
    };
    expect(rendered.map(strip)).toEqual(
      (
        await Promise.all(
          sources.map(async (f) => parseObjects(await readFile(join(repoRoot, 'crds', f), 'utf8'))),
        )
      )
        .flat()
        .map(strip),
    );
    for (const crd of rendered) {
      expect((crd.metadata as { annotations?: Record<string, string> }).annotations).toEqual({
        'helm.sh/resource-policy': 'keep',
      });
    }
    const dropped = await template('aibom-vault', 'aibom-vault-system', ['crds.keep=false']);
    for (const crd of only<K8sObject>(dropped, 'CustomResourceDefinition')) {
      expect((crd.metadata as { annotations?: unknown }).annotations).toBeUndefined();
    }
    expect(only(await template('a', 'b', ['crds.enabled=false']), 'CustomResourceDefinition')).toEqual([]);
  });

  it('ships the baseline PolicyPack of manifests/policypacks as a post-install/post-upgrade hook, or none', async () => {
    const [shipped] = parseObjects(
      await readFile(join(repoRoot, 'manifests/policypacks/baseline.yaml'), 'utf8'),
    );
    const rendered = only<K8sObject & { spec: unknown }>(await template('vault', 'infra'), 'PolicyPack');
    expect(rendered).toHaveLength(1);
    const pack = rendered[0]!;
    expect((shipped as K8sObject & { spec: unknown }).spec).toEqual(pack.spec);
    expect(pack.metadata).toMatchObject({
      name: 'vault-aibom-vault-baseline',
      annotations: {
        'helm.sh/hook': 'post-install,post-upgrade',
        'helm.sh/hook-delete-policy': 'before-hook-creation',
      },
    });
    expect(only(await template('vault', 'infra', ['policyPacks.baseline=false']), 'PolicyPack')).toEqual([]);
  });

  it('renders the RBAC of manifests/rbac.yaml', async () => {
    const manifest = parseObjects(await readFile(join(repoRoot, 'manifests/rbac.yaml'), 'utf8'));
    // Released as in the manifest (name aibom-vault, namespace aibom-vault-system) with the SCITT log
    // and note key Secrets the manifest names, names and Secret names coincide.
    const chart = await template('aibom-vault', 'aibom-vault-system', [
      'transparency.logSecretName=aibom-vault-scitt-log',
      'tlog.noteSecretName=aibom-vault-tlog-note',
    ]);

    const rules = (objects: K8sObject[], kind: 'ClusterRole' | 'Role'): Map<string, unknown> =>
      new Map(only<V1ClusterRole | V1Role>(objects, kind).map((r) => [r.metadata!.name!, r.rules]));
    for (const kind of ['ClusterRole', 'Role'] as const) {
      const expected = rules(manifest, kind);
      expect(expected.size, kind).toBeGreaterThan(0);
      expect(rules(chart, kind), kind).toEqual(expected);
    }
    expect([...rules(chart, 'ClusterRole').keys()].sort()).toEqual([
      'aibom-vault-api',
      'aibom-vault-auditor',
      'aibom-vault-chain-verifier',
      'aibom-vault-controller',
      'aibom-vault-viewer',
    ]);
    const accounts = (objects: K8sObject[]): string[] =>
      only<K8sObject>(objects, 'ServiceAccount').map((a) => `${a.metadata.namespace}/${a.metadata.name}`);
    expect(accounts(chart)).toEqual(accounts(manifest));

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

  it('grants a namespace/name signer Secret by name in its own namespace', async () => {
    const objects = await template('vault', 'infra', ['signer.secretName=pki/vault-signer']);
    const roles = only<V1Role>(objects, 'Role').filter((r) => r.metadata?.namespace === 'pki');
    expect(roles.map((r) => [r.metadata!.name, r.rules])).toEqual([
      [
        'vault-aibom-vault-controller',
        [
          {
            apiGroups: [''],
            resources: ['secrets'],
            resourceNames: ['vault-signer'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      ],
      [
        'vault-aibom-vault-api',
        [
          {
            apiGroups: [''],
            resources: ['secrets'],
            resourceNames: ['vault-signer'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      ],
    ]);
    const inRelease = only<V1Role>(objects, 'Role').filter((r) => r.metadata?.namespace === 'infra');
    expect(inRelease.map((r) => r.metadata!.name)).toEqual(['vault-aibom-vault-controller']);
    expect(JSON.stringify(inRelease)).not.toContain('secrets');
  });

  it('installs the previous chart version, upgrades it to this one (adopting the CRDs as documented) and uninstalls it', async () => {
    const ns = uniqueName('helm-up');
    const tenant = uniqueName('helm-tenant');
    const release = uniqueName('rel');
    const previous = join(repoRoot, 'test/fixtures/helm/aibom-vault-0.1.0.tgz');
    const values = [
      'database.url=postgres://vault:secret@postgres.db.svc:5432/vault',
      's3.endpoint=http://minio.minio.svc:9000',
      's3.accessKey=vault',
      's3.secretKey=secret-key',
    ];
    const sets = values.flatMap((v) => ['--set', v]);
    const get = async (args: string[]): Promise<string[]> =>
      (await kubectl(['get', ...args, '-o', 'name'])).stdout.trim().split('\n').filter(Boolean).sort();
    const byRelease = ['-l', `app.kubernetes.io/instance=${release}`];
    await kubectl(['create', 'namespace', tenant]);
    try {
      // 0.1.0: one Deployment of two containers, one shared identity. The stack already has this
      // version's (newer) CRDs; 0.1.0's crds/ would server-side apply older ones over them, so it
      // is installed as an operator upgrading in place would: --skip-crds.
      await helmK(
        'install',
        release,
        previous,
        '-n',
        ns,
        '--create-namespace',
        '--skip-crds',
        ...sets,
        '--wait=false',
      );
      expect(await get(['deployments', '-n', ns, ...byRelease])).toEqual([
        `deployment.apps/${release}-aibom-vault`,
      ]);

      // The upgrade renders the CRDs as templates; Helm refuses objects it does not own, so the
      // documented adoption (docs/install.md) comes first.
      const refused = await helmK('upgrade', release, chartDir, '-n', ns, ...sets).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(refused?.message).toMatch(
        /CustomResourceDefinition "\w+\.vault\.service\.dev" in namespace "" exists and cannot be imported/,
      );
      for (const crd of [
        'runs.vault.service.dev',
        'attestations.vault.service.dev',
        'policypacks.vault.service.dev',
      ]) {
        await kubectl(['label', '--overwrite', 'crd', crd, 'app.kubernetes.io/managed-by=Helm']);
        await kubectl([
          'annotate',
          '--overwrite',
          'crd',
          crd,
          `meta.helm.sh/release-name=${release}`,
          `meta.helm.sh/release-namespace=${ns}`,
        ]);
      }
      await helmK('upgrade', release, chartDir, '-n', ns, ...sets);
      // The baseline pack, created by the post-upgrade hook once the CRDs are there.
      expect(await get(['policypacks', ...byRelease])).toEqual([
        `policypack.vault.service.dev/${release}-aibom-vault-baseline`,
      ]);
      expect(await get(['deployments', '-n', ns, ...byRelease])).toEqual([
        `deployment.apps/${release}-aibom-vault-api`,
        `deployment.apps/${release}-aibom-vault-controller`,
      ]);
      expect(await get(['serviceaccounts', '-n', ns, ...byRelease])).toEqual([
        `serviceaccount/${release}-aibom-vault-api`,
        `serviceaccount/${release}-aibom-vault-controller`,
      ]);
      const crd = JSON.parse(
        (await kubectl(['get', 'crd', 'runs.vault.service.dev', '-o', 'json'])).stdout,
      ) as {
        metadata: { annotations: Record<string, string> };
      };
      expect(crd.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
      const { stdout: history } = await helmK('history', release, '-n', ns, '-o', 'json');
      expect(
        (JSON.parse(history) as { chart: string; status: string }[]).map((h) => [h.chart, h.status]),
      ).toEqual([
        ['aibom-vault-0.1.0', 'superseded'],
        ['aibom-vault-0.2.0', 'deployed'],
      ]);

      // A Run the controller has put its finalizer on (as it does for every Run it attests).
      const run = {
        apiVersion: 'vault.service.dev/v1',
        kind: 'Run',
        metadata: { name: 'left-behind', namespace: tenant, finalizers: ['vault.service.dev/aibom'] },
        spec: {
          policyPack: { name: 'baseline', version: '1.0.0' },
          steps: [{ id: 's', model: { name: 'm', provider: 'p', version: '1', temperature: 0 } }],
        },
      };
      await kubectl(['create', '-f', '-'], JSON.stringify(run));

      await helmK('uninstall', release, '-n', ns, '--wait');
      expect(
        await get(['deployments,serviceaccounts,services,roles,rolebindings', '-n', ns, ...byRelease]),
      ).toEqual([]);
      expect(await get(['clusterroles,clusterrolebindings', ...byRelease])).toEqual([]);
      // crds.keep: the CRDs, and the Runs, survive the uninstall.
      expect(await get(['crd', 'runs.vault.service.dev'])).toEqual([
        'customresourcedefinition.apiextensions.k8s.io/runs.vault.service.dev',
      ]);
      // With no controller, deleting the Run leaves it Terminating on its finalizer ...
      await kubectl(['delete', 'run', 'left-behind', '-n', tenant, '--wait=false']);
      const terminating = JSON.parse(
        (await kubectl(['get', 'run', 'left-behind', '-n', tenant, '-o', 'json'])).stdout,
      ) as {
        metadata: { deletionTimestamp?: string; finalizers?: string[] };
      };
      expect(terminating.metadata.deletionTimestamp).toBeDefined();
      expect(terminating.metadata.finalizers).toEqual(['vault.service.dev/aibom']);
      // ... until the documented command (docs/install.md, "Uninstall") removes it.
      await kubectl([
        'patch',
        'run',
        'left-behind',
        '-n',
        tenant,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/metadata/finalizers"}]',
      ]);
      await kubectl(['wait', '--for=delete', 'run/left-behind', '-n', tenant, '--timeout=30s']);
    } finally {
      await helmK('uninstall', release, '-n', ns).catch(() => undefined);
      // Hooks are not part of the release: the baseline pack stays, as documented; clean it up here.
      await kubectl(['delete', 'policypacks', ...byRelease, '--ignore-not-found']).catch(() => undefined);
      await kubectl(['delete', 'namespace', ns, tenant, '--wait=false', '--ignore-not-found']);
    }
  });
});

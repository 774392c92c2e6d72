import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { Agent } from 'node:https';
import { dirname, join } from 'node:path';
import { request } from 'node:https';
import { freePort, startProcess, StartError, waitReady, type Launch, type Proc } from './proc.ts';
import type { StackTool, Tools } from './tools.ts';

/** Users of the static token file: an admin and two users with no RBAC grants. */
export const STACK_USERS = {
  admin: ['system:masters'],
  alice: [],
  bob: [],
  // Test harness identity for tests that run the controller or the API in-process with their own
  // signer Secrets and Leases: bound to both service roles of manifests/rbac.yaml, plus `get` (and
  // list/watch by name, as the signer watch does) on Secrets named operator-test-signer (what those
  // tests create). Never used by the stack's own
  // controller and sidecar, which run as the ServiceAccounts below.
  'aibom-vault': [],
} as const satisfies Record<string, readonly string[]>;

/**
 * The two service identities of manifests/rbac.yaml: ServiceAccounts in aibom-vault-system whose
 * tokens (TokenRequest, as a pod would get them) the stack's controller and sidecar use.
 */
export const SERVICE_ACCOUNTS = ['aibom-vault-controller', 'aibom-vault-api'] as const;
export type StackUser = keyof typeof STACK_USERS | (typeof SERVICE_ACCOUNTS)[number];
export const SYSTEM_NAMESPACE = 'aibom-vault-system';

/** RBAC of the test harness identity `aibom-vault` (see STACK_USERS); stack-only, not shipped. */
const testIdentityRbac = [
  ...(['ClusterRoleBinding', 'RoleBinding'] as const).flatMap((kind) =>
    (['controller', 'api'] as const).map((role) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind,
      metadata: {
        name: `aibom-vault-stack-user-${role}`,
        ...(kind === 'RoleBinding' ? { namespace: SYSTEM_NAMESPACE } : {}),
      },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: kind === 'RoleBinding' ? 'Role' : 'ClusterRole',
        name: `aibom-vault-${role}`,
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'aibom-vault' }],
    })),
  ),
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'aibom-vault-stack-test-signer' },
    rules: [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: ['operator-test-signer'],
        verbs: ['get', 'list', 'watch'],
      },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'aibom-vault-stack-test-signer' },
    roleRef: {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'aibom-vault-stack-test-signer',
    },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'aibom-vault' }],
  },
];

/**
 * What a node (hack/stack/node, `npm run stack -- up --node`) needs of the control plane: the API
 * server advertised at the node's address (the `kubernetes` Service's endpoint pods connect to), the
 * ServiceAccount admission plugin (pods get their token volume), the Node authorizer with
 * NodeRestriction for the kubelet, a client certificate for the kubelet API (logs, exec), static
 * tokens for the node's components, and every default controller of kube-controller-manager
 * (Deployments, ReplicaSets, EndpointSlices, kube-root-ca.crt, ...).
 */
export interface KubeNodeOptions {
  readonly address: string;
  /** Static-token users of the node's components: name → groups. */
  readonly users: Record<string, readonly string[]>;
  readonly kubeletClient: { readonly certFile: string; readonly keyFile: string };
}

export interface Kube {
  readonly procs: Proc[];
  readonly server: string;
  /** etcd's client URL (plain HTTP on loopback): the benches read object sizes from it. */
  readonly etcd: string;
  readonly kubeconfig: string;
  /** Kubeconfig per user, same server and CA. */
  readonly kubeconfigs: Record<StackUser, string>;
  readonly tokens: Record<StackUser, string>;
  readonly caFile: string;
  /** Kubeconfigs of KubeNodeOptions.users (empty without a node). */
  readonly nodeKubeconfigs: Record<string, string>;
}

async function httpsGet(url: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        headers: { authorization: `Bearer ${token}` },
        agent: new Agent({ rejectUnauthorized: false }),
        timeout: 2000,
      },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

function kubeconfigFor(server: string, caData: string, user: string, token: string): string {
  // JSON is valid YAML: kubectl and client-node read it as a kubeconfig.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stack', cluster: { server, 'certificate-authority-data': caData } }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: user, context: { cluster: 'stack', user, namespace: 'default' } }],
      'current-context': user,
    },
    null,
    2,
  );
}

export async function startKube(
  root: string,
  tools: Tools<StackTool>,
  crdDir: string,
  rbacFile: string,
  launch: Launch = {},
  node?: KubeNodeOptions,
): Promise<Kube> {
  const spawnHook = launch.onSpawn ? { onSpawn: launch.onSpawn } : {};
  const dir = join(root, 'kube');
  const certDir = join(dir, 'pki');
  await mkdir(certDir, { recursive: true });
  const procs: Proc[] = [];

  // etcd
  const [etcdPort, peerPort] = [await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const etcd = await startProcess({
    name: 'etcd',
    command: tools.etcd,
    args: [
      '--name=stack',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=stack=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    logFile: join(root, 'etcd.log'),
    ...spawnHook,
  });
  procs.push(etcd);
  await waitReady(etcd, async () => (await fetch(`${etcdUrl}/health`)).ok, 30_000, launch.signal);

  // kube-apiserver: static tokens for real users, RBAC, a service-account key pair.
  const tokens = Object.fromEntries(
    Object.keys(STACK_USERS).map((u) => [u, randomBytes(24).toString('base64url')]),
  ) as Record<StackUser, string>;
  const nodeTokens = Object.fromEntries(
    Object.keys(node?.users ?? {}).map((u) => [u, randomBytes(24).toString('base64url')]),
  );
  const tokenFile = join(dir, 'tokens.csv');
  await writeFile(
    tokenFile,
    [
      ...Object.entries(STACK_USERS).map(([u, groups]) => [tokens[u as StackUser], u, groups] as const),
      ...Object.entries(node?.users ?? {}).map(([u, groups]) => [nodeTokens[u]!, u, groups] as const),
    ]
      .map(([token, u, groups]) => `${token},${u},${u},"${groups.join(',')}"`)
      .join('\n') + '\n',
    { mode: 0o600 },
  );
  const sa = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const saKey = join(dir, 'sa.key');
  const saPub = join(dir, 'sa.pub');
  await writeFile(saKey, sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(saPub, sa.publicKey.export({ type: 'spki', format: 'pem' }));
  const apiPort = await freePort();
  const server = `https://127.0.0.1:${apiPort}`;
  const apiserver = await startProcess({
    name: 'kube-apiserver',
    command: tools['kube-apiserver'],
    args: [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${certDir}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      `--advertise-address=${node?.address ?? '127.0.0.1'}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      `--authorization-mode=${node ? 'Node,RBAC' : 'RBAC'}`,
      `--token-auth-file=${tokenFile}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      ...(node
        ? [
            '--enable-admission-plugins=NodeRestriction',
            `--kubelet-client-certificate=${node.kubeletClient.certFile}`,
            `--kubelet-client-key=${node.kubeletClient.keyFile}`,
            '--kubelet-preferred-address-types=InternalIP,Hostname',
          ]
        : ['--disable-admission-plugins=ServiceAccount']),
      '--allow-privileged=false',
      '--enable-priority-and-fairness=false',
      // STACK_KUBE_PROFILING=1 serves /debug/pprof (bench/operator-compare.ts BENCH_PPROF_DIR).
      `--profiling=${process.env.STACK_KUBE_PROFILING === '1'}`,
      '--v=1',
    ],
    logFile: join(root, 'kube-apiserver.log'),
    ...spawnHook,
  });
  procs.push(apiserver);
  await waitReady(
    apiserver,
    async () => (await httpsGet(`${server}/readyz`, tokens.admin)).status === 200,
    120_000,
    launch.signal,
  );

  // The apiserver's self-generated serving certificate is self-signed: it is its own CA.
  const caFile = join(certDir, 'apiserver.crt');
  const caData = (await readFile(caFile)).toString('base64');
  const kubeconfigs = {} as Record<StackUser, string>;
  for (const user of Object.keys(STACK_USERS) as StackUser[]) {
    const file = join(dir, `kubeconfig-${user}.yaml`);
    await writeFile(file, kubeconfigFor(server, caData, user, tokens[user]), { mode: 0o600 });
    kubeconfigs[user] = file;
  }
  const kubeconfig = kubeconfigs.admin;
  const nodeKubeconfigs: Record<string, string> = {};
  for (const [user, token] of Object.entries(nodeTokens)) {
    const file = join(dir, `kubeconfig-${user.replaceAll(':', '-')}.yaml`);
    await writeFile(file, kubeconfigFor(server, caData, user, token), { mode: 0o600 });
    nodeKubeconfigs[user] = file;
  }

  // kube-controller-manager: garbage collection of owned objects and namespace deletion are part of
  // the Kubernetes behaviour the operator relies on (Attestations owned by their Run).
  const kcm = await startProcess({
    name: 'kube-controller-manager',
    command: tools['kube-controller-manager'],
    args: [
      `--kubeconfig=${kubeconfig}`,
      node
        ? '--controllers=*'
        : '--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token',
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${caFile}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${await freePort()}`,
      `--cert-dir=${join(dir, 'kcm-pki')}`,
      '--v=1',
    ],
    logFile: join(root, 'kube-controller-manager.log'),
    ...spawnHook,
  });
  procs.push(kcm);
  // Ready when the serviceaccount controller has made the default ServiceAccount.
  await waitReady(
    kcm,
    async () =>
      (await httpsGet(`${server}/api/v1/namespaces/default/serviceaccounts/default`, tokens.admin)).status ===
      200,
    120_000,
    launch.signal,
  );

  // The CRDs shipped in crds/ are the single source of truth: apply exactly those files.
  const kubectl = (args: string[], input?: string) =>
    new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
      const child = execFile(
        tools.kubectl,
        [`--kubeconfig=${kubeconfig}`, ...args],
        { maxBuffer: 8 * 1024 * 1024, ...(launch.signal ? { signal: launch.signal } : {}) },
        (err, stdout, stderr) => {
          if (err) reject(Object.assign(new Error(err.message, { cause: err }), { stderr }));
          else resolve({ stdout, stderr });
        },
      );
      child.stdin?.end(input ?? '');
    });
  try {
    await kubectl(['apply', '--server-side', '-f', crdDir]);
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
    // RBAC of the service (its two ServiceAccounts), and the test harness identity.
    await kubectl(['apply', '--server-side', '-f', rbacFile]);
    // The Runs' ValidatingAdmissionPolicy (docs/runs.md), beside the RBAC in manifests/.
    await kubectl(['apply', '--server-side', '-f', join(dirname(rbacFile), 'admission-policy.yaml')]);
    await kubectl(
      ['apply', '--server-side', '-f', '-'],
      testIdentityRbac.map((o) => JSON.stringify(o)).join('\n'),
    );
    // Tokens of the ServiceAccounts, as the kubelet would project them into a pod (TokenRequest).
    for (const sa of SERVICE_ACCOUNTS) {
      const { stdout } = await kubectl(['create', 'token', sa, '-n', SYSTEM_NAMESPACE, '--duration=720h']);
      tokens[sa] = stdout.trim();
      const file = join(dir, `kubeconfig-${sa}.yaml`);
      await writeFile(file, kubeconfigFor(server, caData, sa, tokens[sa]), { mode: 0o600 });
      kubeconfigs[sa] = file;
    }
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new StartError('crds', `applying ${crdDir} and ${rbacFile} failed`, e.stderr ?? e.message);
  }
  // "Established" is not "served": right after it the API server answers 429 "storage is
  // (re)initializing" for a while. Ready means both resources list successfully.
  await waitReady(
    apiserver,
    async () => {
      for (const plural of ['runs', 'attestations', 'policypacks']) {
        const r = await httpsGet(`${server}/apis/vault.service.dev/v1/${plural}?limit=1`, tokens.admin);
        if (r.status !== 200) return false;
      }
      return true;
    },
    60_000,
    launch.signal,
  );
  // The policy packs of manifests/policypacks (the `baseline` pack the chart ships), once the
  // PolicyPack resource is served.
  try {
    await kubectl(['apply', '--server-side', '-f', join(dirname(rbacFile), 'policypacks')]);
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new StartError('crds', 'applying manifests/policypacks failed', e.stderr ?? e.message);
  }
  return { procs, server, etcd: etcdUrl, kubeconfig, kubeconfigs, tokens, caFile, nodeKubeconfigs };
}

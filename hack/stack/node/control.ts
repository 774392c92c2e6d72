import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, startProcess, waitReady, type Launch, type Proc } from '../proc.ts';
import type { NodeTool, Tools } from '../tools.ts';
import { NODE_NAME } from './kubelet.ts';
import { NODE_NETWORK } from './network.ts';
import { trySh } from './host.ts';

/**
 * kube-scheduler: Deployments' pods have no node until it binds them. Its own static-token user
 * `system:kube-scheduler`, which the API server's bootstrap RBAC already binds to its role.
 */
export async function startScheduler(
  dir: string,
  tools: Tools<NodeTool>,
  kubeconfig: string,
  logFile: string,
  launch: Launch,
): Promise<Proc> {
  const port = await freePort();
  const proc = await startProcess({
    name: 'kube-scheduler',
    command: tools['kube-scheduler'],
    args: [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, 'scheduler-pki')}`,
      '--v=1',
    ],
    logFile,
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(
    proc,
    async () => {
      const r = await fetch(`https://127.0.0.1:${port}/healthz`).catch(() => undefined);
      // Its serving certificate is self-signed: any TLS answer means it is serving; fall back to
      // the log line when fetch refuses the certificate.
      return r?.ok === true || (await isServing(logFile));
    },
    60_000,
    launch.signal,
  );
  return proc;
}

async function isServing(logFile: string): Promise<boolean> {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return /Serving securely on/.test(text);
}

/**
 * kube-proxy in nftables mode: the Services' ClusterIPs (the `kubernetes` Service pods reach the
 * API server through, the chart's API Service) as rules in its own nftables tables `ip kube-proxy`
 * and `ip6 kube-proxy`, which `kube-proxy --cleanup` removes again. Conntrack sysctls are left as
 * the host has them (all zero here means "do not change"). Its static-token user
 * `system:kube-proxy` is bound by bootstrap RBAC to `system:node-proxier`.
 */
export async function startProxy(
  dir: string,
  tools: Tools<NodeTool>,
  kubeconfig: string,
  logFile: string,
  launch: Launch,
): Promise<{ proc: Proc; config: string }> {
  await mkdir(dir, { recursive: true });
  const [healthz, metrics] = [await freePort(), await freePort()];
  const config = join(dir, 'kube-proxy.yaml');
  await writeFile(
    config,
    stringify({
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      mode: 'nftables',
      clientConnection: { kubeconfig },
      hostnameOverride: NODE_NAME,
      clusterCIDR: NODE_NETWORK.podCidr,
      healthzBindAddress: `127.0.0.1:${healthz}`,
      metricsBindAddress: `127.0.0.1:${metrics}`,
      nodePortAddresses: [`${NODE_NETWORK.address}/32`],
      conntrack: {
        maxPerCore: 0,
        min: 0,
        tcpEstablishedTimeout: '0s',
        tcpCloseWaitTimeout: '0s',
        udpTimeout: '0s',
        udpStreamTimeout: '0s',
      },
    }),
  );
  const proc = await startProcess({
    name: 'kube-proxy',
    command: tools['kube-proxy'],
    args: [`--config=${config}`, '--v=1'],
    logFile,
    env: { ...process.env, PATH: '/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' },
    ...(launch.onSpawn ? { onSpawn: launch.onSpawn } : {}),
  });
  await waitReady(
    proc,
    async () => (await fetch(`http://127.0.0.1:${healthz}/healthz`)).ok,
    60_000,
    launch.signal,
  );
  return { proc, config };
}

/** Removes kube-proxy's nftables tables (and any iptables chains it made): its own --cleanup. */
export async function cleanupProxy(tools: Tools<NodeTool>, config: string): Promise<string[]> {
  const r = await trySh(tools['kube-proxy'], [`--config=${config}`, '--cleanup']);
  return r instanceof Error ? [`kube-proxy --cleanup: ${r.message}`] : [];
}

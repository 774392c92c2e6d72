import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sh, trySh } from './host.ts';

/**
 * The node's pod network: one Linux bridge the node owns, with the node's address on it, and the
 * Debian CNI `bridge` + `host-local` plugins attaching each pod to it with a veth pair.
 *
 * Pods reach the node's own addresses (the API server through the `kubernetes` Service, and the
 * stack's servers through the forwarder) and the node reaches the pods (probes, the API Service
 * from the host): both are local delivery, so the host's `net.ipv4.ip_forward` stays 0, as found.
 * Nothing routes pod traffic off the node (no masquerading, no default gateway role for the
 * bridge): a single-node cluster has nowhere else to send it.
 */
export const NODE_NETWORK = {
  bridge: 'aibomv0',
  /** The node's address (the bridge's), pods' default gateway, and where the forwarder listens. */
  address: '10.244.0.1',
  prefix: 24,
  podCidr: '10.244.0.0/24',
  /** The API server's --service-cluster-ip-range (hack/stack/kube.ts). */
  serviceCidr: '10.0.0.0/24',
} as const;

export const CNI_NETWORK_NAME = 'aibom-vault-node';

/** True when the bridge exists (a node is running, or one was not cleaned up). */
export async function bridgeExists(): Promise<boolean> {
  return !((await trySh('ip', ['link', 'show', 'dev', NODE_NETWORK.bridge])) instanceof Error);
}

/** Creates the bridge with the node's address; fails if the pod subnet is already routed here. */
export async function createBridge(): Promise<void> {
  const routes = await sh('ip', ['-4', 'route', 'show', 'match', NODE_NETWORK.address]);
  const clash = routes
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('default'))
    .join('; ');
  if (clash) {
    throw new Error(
      `the node's pod network ${NODE_NETWORK.podCidr} overlaps a route of this host (${clash}); free it or change NODE_NETWORK in hack/stack/node/network.ts`,
    );
  }
  await sh('ip', ['link', 'add', 'name', NODE_NETWORK.bridge, 'type', 'bridge']);
  await sh('ip', [
    'addr',
    'add',
    `${NODE_NETWORK.address}/${NODE_NETWORK.prefix}`,
    'dev',
    NODE_NETWORK.bridge,
  ]);
  await sh('ip', ['link', 'set', 'dev', NODE_NETWORK.bridge, 'up']);
}

/**
 * Deletes the bridge and any veth still enslaved to it (a pod's veth goes with its network
 * namespace; one left by a killed sandbox is removed here). Returns what it could not remove.
 */
export async function deleteBridge(): Promise<string[]> {
  const left: string[] = [];
  if (!(await bridgeExists())) return left;
  const links = await trySh('ip', ['-o', 'link', 'show', 'master', NODE_NETWORK.bridge]);
  if (typeof links === 'string') {
    for (const m of links.matchAll(/^\d+:\s+([^@:\s]+)/gm)) {
      const r = await trySh('ip', ['link', 'del', 'dev', m[1]!]);
      if (r instanceof Error) left.push(`veth ${m[1]}: ${r.message}`);
    }
  }
  const r = await trySh('ip', ['link', 'del', 'dev', NODE_NETWORK.bridge]);
  if (r instanceof Error) left.push(`bridge ${NODE_NETWORK.bridge}: ${r.message}`);
  return left;
}

/**
 * The CNI network list containerd's CRI plugin reads: the Debian `bridge` plugin on the node's
 * bridge (`isGateway: false`: the bridge keeps the address createBridge gave it, and the plugin does
 * not turn on IP forwarding, which it does for a gateway) with `host-local` addresses whose state
 * lives in the node's own directory, not /var/lib/cni.
 */
export async function writeCniConfig(dir: string): Promise<{ confDir: string }> {
  const confDir = join(dir, 'cni', 'net.d');
  await mkdir(confDir, { recursive: true });
  const conf = {
    cniVersion: '1.0.0',
    name: CNI_NETWORK_NAME,
    plugins: [
      {
        type: 'bridge',
        bridge: NODE_NETWORK.bridge,
        isGateway: false,
        isDefaultGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          dataDir: join(dir, 'cni', 'ipam'),
          ranges: [
            [{ subnet: NODE_NETWORK.podCidr, gateway: NODE_NETWORK.address, rangeStart: '10.244.0.10' }],
          ],
          routes: [{ dst: '0.0.0.0/0', gw: NODE_NETWORK.address }],
        },
      },
    ],
  };
  await writeFile(join(confDir, '10-aibom-vault-node.conflist'), JSON.stringify(conf, null, 2));
  return { confDir };
}

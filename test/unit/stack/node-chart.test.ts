/**
 * The node's chart values (hack/stack/node/chart.ts): how the stack's loopback servers are named
 * for pods, how the caller's configuration keys become chart values, and that keys the chart
 * derives itself are refused rather than silently duplicated in the pods' environment.
 */
import { describe, expect, it } from 'vitest';
import { chartValues, settingsToValues, viaNode, type ChartTarget } from '../../../hack/stack/node/chart.ts';
import { statusSequence, burstSpec } from '../../e2e/helpers/pipeline.ts';

const target: ChartTarget = {
  helm: '/bin/helm',
  kubectl: '/bin/kubectl',
  kubeconfig: '/k',
  helmHome: '/h',
  chartDir: '/c',
  release: 'aibom-vault-node',
  namespace: 'aibom-vault-node',
};
const wiring = {
  nodeAddress: '10.244.0.1',
  databaseUrl: 'postgresql://vault_app:pw@127.0.0.1:5432/vault',
  migrationUrl: 'postgresql://vault_owner:pw@127.0.0.1:5432/vault',
  s3: { endpoint: 'http://127.0.0.1:9000', accessKey: 'a', secretKey: 's', bucket: 'b' },
  tsa: { url: 'http://127.0.0.1:3000/api/v1/timestamp', caFile: '/ca.crt' },
};

describe('viaNode', () => {
  it('moves loopback URLs to the node address, same port and path, credentials kept', () => {
    expect(viaNode(wiring.databaseUrl, '10.244.0.1')).toBe('postgresql://vault_app:pw@10.244.0.1:5432/vault');
    expect(viaNode(wiring.tsa.url, '10.244.0.1')).toBe('http://10.244.0.1:3000/api/v1/timestamp');
    expect(viaNode('http://localhost:9000', '10.244.0.1')).toBe('http://10.244.0.1:9000');
  });
  it('leaves other hosts alone', () => {
    expect(viaNode('https://db.example.com:5432/vault', '10.244.0.1')).toBe(
      'https://db.example.com:5432/vault',
    );
  });
});

describe('settingsToValues', () => {
  it('maps keys the chart has values for, passes the rest as extraEnv of both Deployments', () => {
    const { values, extraEnv } = settingsToValues({
      SERVICE_TRANSPARENCY_WRITER: '1',
      LOG_LEVEL: 'debug',
      WATCH_NAMESPACE: 'team-a',
      RECONCILE_TIMEOUT_MS: '9000',
    });
    expect(values).toEqual({
      logLevel: 'debug',
      transparency: { writer: true },
      controller: { watchNamespace: 'team-a' },
    });
    expect(extraEnv).toEqual([{ name: 'RECONCILE_TIMEOUT_MS', value: '9000' }]);
  });
  it('refuses keys the chart sets from its own wiring', () => {
    for (const k of ['SIGNER_SECRET', 'LEADER_ELECTION_LEASE', 'SCITT_LOG_ISSUER', 'S3_REGION']) {
      expect(() => settingsToValues({ [k]: 'x' }), k).toThrow(new RegExp(k));
    }
  });
});

describe('chartValues', () => {
  it('wires the stack as external services through the node address, 2 + 2 replicas, CRDs managed outside', () => {
    const v = chartValues(target, wiring, 'node', { SERVICE_TRANSPARENCY_WRITER: '1' }) as {
      image: unknown;
      crds: unknown;
      s3: { endpoint: string };
      tsa: { url: string; caConfigMap: string };
      transparency: { writer: boolean; logSecretName: string };
      controller: { replicas: number };
      sidecar: { replicas: number };
      signer: { secretName: string };
    };
    expect(v.image).toEqual({ repository: 'aibom-vault', tag: 'node' });
    expect(v.crds).toEqual({ enabled: false });
    expect(v.s3.endpoint).toBe('http://10.244.0.1:9000');
    expect(v.tsa).toEqual({
      url: 'http://10.244.0.1:3000/api/v1/timestamp',
      caConfigMap: 'aibom-vault-node-tsa',
    });
    expect(v.transparency.writer).toBe(true);
    expect(v.transparency.logSecretName).toBe('aibom-vault-system/aibom-vault-scitt-log');
    expect(v.signer.secretName).toBe('aibom-vault-system/aibom-vault-signer');
    expect([v.controller.replicas, v.sidecar.replicas]).toEqual([2, 2]);
  });
});

describe('the e2e pipeline documents', () => {
  it('are fixed before the first write: every step finished once, with the same timestamps in every later document', () => {
    const spec = burstSpec(3);
    for (const fail of [false, true]) {
      const docs = statusSequence(spec, fail);
      expect(docs.at(-1)!.phase).toBe(fail ? 'Failed' : 'Succeeded');
      const finished = new Map<string, string>();
      for (const d of docs) {
        for (const s of d.steps) {
          if (s.phase === 'Succeeded' || s.phase === 'Failed') {
            const prev = finished.get(s.id);
            if (prev !== undefined) expect(JSON.stringify(s)).toBe(prev);
            finished.set(s.id, JSON.stringify(s));
          }
        }
      }
      expect([...finished.keys()]).toEqual(spec.steps.map((s) => s.id));
      expect((JSON.parse(finished.get('post')!) as { phase: string }).phase).toBe(
        fail ? 'Failed' : 'Succeeded',
      );
    }
  });
});

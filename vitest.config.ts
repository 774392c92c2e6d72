import { defineConfig } from 'vitest/config';

// Two projects: `unit` (pure logic, in-memory fakes allowed) and `integration` (one real stack per
// test run: kube-apiserver + etcd + kube-controller-manager, PostgreSQL, MinIO; see test/global-setup.ts).
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          // Property tests run hundreds of cases; on a busy 2-core machine the 5 s default sits too
          // near their normal duration. Time is never what a unit test checks.
          testTimeout: 60_000,
          // Unit tests first, then the integration project with its own worker limit.
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/conformance/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/global-setup.ts'],
          sequence: { groupOrder: 1 },
          // Servers are shared and the machine has 2 cores: generous per-test time, no timing asserts.
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
      {
        test: {
          // A real node (kubelet, containerd, kube-proxy) with the chart on it, and faults while
          // bursts of Runs finish (test/e2e/node.test.ts, docs/install.md "A real node"). After the
          // integration project, alone: its own stack, and the machine's two cores to itself.
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          environment: 'node',
          sequence: { groupOrder: 2 },
          // Each fault round drives 200 Runs through the pods and waits for their AIBOMs (a few
          // minutes); the limits are far above that and never what a test checks.
          testTimeout: 90 * 60_000,
          hookTimeout: 60 * 60_000,
          fileParallelism: false,
          maxWorkers: 1,
        },
      },
    ],
  },
});

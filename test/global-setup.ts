import type { TestProject } from 'vitest/node';
import { watchOwner } from '../hack/stack/reaper.ts';
import { startStack, stopStack, type StackInfo } from '../hack/stack/stack.ts';
import { TEST_TOOLS, type TestTool } from '../hack/stack/tools.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo<TestTool>;
  }
}

/**
 * One real stack per test run (and project), started by the same code as `npm run stack -- up`.
 * Tests isolate themselves (own namespace, own database, own bucket prefix) instead of restarting
 * servers.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The S3 matrix (vitest.config.ts): the integration-seaweedfs project runs on SeaweedFS. The
  // stack's tools plus what only tests run (helm, cosign, crane, weed): hack/install.sh --test
  // builds them.
  const s3 = project.name === 'integration-seaweedfs' ? 'seaweedfs' : 'minio';
  const stack = await startStack({
    s3,
    tools: TEST_TOOLS,
    log: (l) => console.log(`[stack${s3 === 'minio' ? '' : ` ${s3}`}] ${l}`),
  });
  // vitest exits on SIGINT/SIGTERM without running this teardown: the reaper stops the stack then.
  await watchOwner(stack);
  project.provide('stack', stack);
  return async () => {
    await stopStack(stack);
  };
}

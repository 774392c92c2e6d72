import type { TestProject } from 'vitest/node';
import { startStack, stopStack, type StackInfo } from '../hack/stack/stack.ts';
import { TEST_TOOLS, type TestTool } from '../hack/stack/tools.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo<TestTool>;
  }
}

/**
 * One real stack per test run, started by the same code as `npm run stack -- up`. Tests isolate
 * themselves (own namespace, own database, own bucket prefix) instead of restarting servers.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The stack's tools plus what only tests run (helm, cosign, crane): hack/install.sh --test builds them.
  const stack = await startStack({ tools: TEST_TOOLS, log: (l) => console.log(`[stack] ${l}`) });
  project.provide('stack', stack);
  return async () => {
    await stopStack(stack);
  };
}

import type { TestProject } from 'vitest/node';
import { startStack, stopStack, type StackInfo } from '../hack/stack/stack.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

/**
 * One real stack per test run, started by the same code as `npm run stack -- up`. Tests isolate
 * themselves (own namespace, own database, own bucket prefix) instead of restarting servers.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stack = await startStack({ log: (l) => console.log(`[stack] ${l}`) });
  project.provide('stack', stack);
  return async () => {
    await stopStack(stack);
  };
}

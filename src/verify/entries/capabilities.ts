import type { Trust } from '../../attest/index.ts';
import { verifyCapabilities } from '../../capability/verify.ts';
import type { BundleState } from '../state.ts';

/**
 * Workflow step (d) on a record of the bundle: the capability chains of a capability or step
 * record and their tokens (VC, Biscuit) and served views, under the same trusted key as the
 * envelope (src/capability/verify.ts). Asynchronous (Biscuit verification): deferred, and awaited
 * before the next entry is read. Each chain that verifies adds its line (`step … approved by …`).
 */
export function checkCapabilities(
  state: BundleState,
  record: Record<string, unknown>,
  trust: Trust,
  path: string,
): void {
  if (record.kind !== 'capability' && record.kind !== 'step') return;
  state.defer(
    verifyCapabilities(record, trust).then((report) => {
      for (const p of report.problems) state.fail(path, p.code, p.message);
      for (const line of report.lines) state.chainLines.push(line);
    }),
  );
}

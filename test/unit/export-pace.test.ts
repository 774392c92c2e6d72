/**
 * The export pace (src/export/pace.ts) on a fake clock: who is closed (the idle, the trickle) and
 * who is not (a reader above the floor, a slow service, a cold start into socket buffers).
 */
import { describe, expect, it } from 'vitest';
import {
  describeVerdict,
  ExportPace,
  exportPace,
  paceHeader,
  type PaceLimits,
} from '../../src/export/pace.ts';

const MiB = 1024 * 1024;
const limits: PaceLimits = { idleMs: 60_000, minBytesPerSecond: 32 * 1024, windowMs: 120_000 };

/**
 * Drives `pace` with 1 MiB chunks a client takes at `bytesPerSecond`, the service preparing each in
 * `prepareMs` (time that must not count), and a watchdog tick every 5 s; returns the first verdict
 * and when (ms of the clock), or null after `forMs`.
 */
function drive(
  bytesPerSecond: number,
  forMs: number,
  opts: { prepareMs?: number; burst?: number; l?: PaceLimits } = {},
): { at: number; verdict: ReturnType<ExportPace['verdict']> } | null {
  const l = opts.l ?? limits;
  const pace = new ExportPace(l);
  const takeMs = (MiB * 1000) / bytesPerSecond;
  let now = 0;
  let nextTick = 5_000;
  let burst = opts.burst ?? 0;
  while (now < forMs) {
    now += opts.prepareMs ?? 0;
    pace.offered(MiB, now);
    // Socket buffers take the first `burst` chunks at once.
    const takenAt = now + (burst-- > 0 ? 0 : takeMs);
    while (nextTick <= takenAt) {
      const verdict = pace.verdict(nextTick);
      if (verdict !== null) return { at: nextTick, verdict };
      nextTick += 5_000;
    }
    now = takenAt;
    pace.tookOffered(now);
  }
  return null;
}

describe('export pace', () => {
  it('keeps a reader above the floor for hours, however slow the service is', () => {
    expect(drive(40 * 1024, 4 * 3_600_000)).toBeNull();
    expect(drive(40 * 1024, 3_600_000, { prepareMs: 30_000 })).toBeNull();
    expect(drive(50 * MiB, 3_600_000)).toBeNull();
  });

  it('closes a steady trickle below the floor, after a window of waiting, as slow', () => {
    const cut = drive(20 * 1024, 3_600_000);
    expect(cut?.verdict?.reason).toBe('slow');
    expect(cut!.at).toBeGreaterThanOrEqual(limits.windowMs);
    expect(cut!.at).toBeLessThanOrEqual(3 * limits.windowMs);
    if (cut?.verdict?.reason === 'slow') expect(cut.verdict.bytesPerSecond).toBeLessThan(32 * 1024);
  });

  it('judges the newest window: a cold start into socket buffers does not buy hours', () => {
    // 20 chunks taken at once (buffers), then a trickle: closed once the burst leaves the window.
    const cut = drive(20 * 1024, 3_600_000, { burst: 20 });
    expect(cut?.verdict?.reason).toBe('slow');
    expect(cut!.at).toBeLessThan(3_600_000);
  });

  it('closes a client that takes nothing for the idle time, as idle', () => {
    const pace = new ExportPace(limits);
    pace.offered(MiB, 0);
    expect(pace.verdict(59_999)).toBeNull();
    expect(pace.verdict(60_000)).toEqual({ reason: 'idle', waitedMs: 60_000 });
  });

  it('never judges the time the service spends: no chunk offered, no clock', () => {
    const pace = new ExportPace(limits);
    for (let t = 0; t <= 3_600_000; t += 5_000) expect(pace.verdict(t)).toBeNull();
  });

  it('a floor of 0 keeps only the idle check', () => {
    const l = { ...limits, minBytesPerSecond: 0 };
    expect(drive(1024 * 20, 3_600_000, { l })).toBeNull();
  });

  it('declares the limits and says why it closed in one line', () => {
    const l = exportPace(60_000);
    expect(l).toEqual({ idleMs: 60_000, minBytesPerSecond: 32 * 1024, windowMs: 120_000 });
    expect(paceHeader(l)).toBe('32768; window=120; idle=60');
    expect(describeVerdict({ reason: 'slow', bytesPerSecond: 1000.4, overMs: 120_000 }, l)).toBe(
      'the client read 1000 bytes/s over 120 s of waiting, below the floor of 32768 bytes/s',
    );
    expect(describeVerdict({ reason: 'idle', waitedMs: 61_000 }, l)).toBe(
      'the client took no byte for 61 s (limit 60 s)',
    );
  });
});

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attestation, digestOf, setupVault, type TestVault } from './helpers.ts';

const ROWS = 100_000;
const BATCH = 1000;
const MiB = 1024 * 1024;

// Measure retained memory, not garbage the collector has not reached yet: a full GC before each
// sample. (`--expose-gc` for this process only, without touching the runner's flags.)
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
function retainedHeap(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

describe('vault streaming export', () => {
  let t: TestVault;
  beforeAll(async () => {
    t = await setupVault('stream');
    // ~1.7 KiB envelopes: holding all rows would take several hundred MiB of heap.
    for (let b = 0; b < ROWS / BATCH; b++) {
      const ns = b % 2 === 0 ? 'even' : 'odd';
      await t.vault.attestations.append(
        Array.from({ length: BATCH }, () => attestation({ namespace: ns, padding: 1000 })),
      );
    }
  });
  afterAll(async () => {
    await t.close();
  });

  it(`streams ${ROWS} rows in id order with bounded heap growth`, async () => {
    const baseline = retainedHeap();
    let peak = baseline;
    let count = 0;
    let prev = '';
    let ordered = true;
    let lateWrite: Promise<unknown> | undefined;
    for await (const s of t.vault.attestations.stream({ namespaces: ['even', 'odd'] })) {
      if (s.id <= prev) ordered = false;
      prev = s.id;
      count += 1;
      // Rows committed after the stream started are not part of this export.
      if (count === 500) lateWrite = t.vault.attestations.append([attestation({ namespace: 'even' })]);
      if (count % (10 * BATCH) === 0) peak = Math.max(peak, retainedHeap());
    }
    await lateWrite;
    const growth = peak - baseline;
    console.log(`streamed ${count} rows, retained heap growth ${(growth / MiB).toFixed(1)} MiB`);
    expect(count).toBe(ROWS);
    expect(ordered).toBe(true);
    expect(growth).toBeLessThan(64 * MiB);
  });

  it('applies filters while streaming', async () => {
    let count = 0;
    for await (const s of t.vault.attestations.stream({ namespaces: ['odd', 'other'] }, { batchSize: 777 })) {
      expect(s.namespace).toBe('odd');
      count += 1;
    }
    expect(count).toBe(ROWS / 2);
  });

  it('yields the same rows when it reads ahead, in flat memory', async () => {
    // The export's pass fetches the next batch while the current one is consumed.
    const filter = { namespaces: ['odd', 'even'] };
    const { count: total, until } = await t.vault.attestations.selectionSize(filter, 2 * ROWS);
    const ids = async (readAhead: boolean, batchSize: number) => {
      const out: string[] = [];
      for await (const s of t.vault.attestations.stream(filter, { until, batchSize, readAhead }))
        out.push(s.id);
      return out;
    };
    const plain = await ids(false, 777);
    expect(plain).toHaveLength(total);
    expect(total).toBeGreaterThanOrEqual(ROWS);
    expect(await ids(true, 777)).toEqual(plain);
    // A last batch shorter than the others, and one exactly full (an empty read ends the stream).
    expect(await ids(true, 1000)).toEqual(plain);

    const baseline = retainedHeap();
    let peak = baseline;
    let count = 0;
    for await (const s of t.vault.attestations.stream(filter, { until, batchSize: BATCH, readAhead: true })) {
      count += s.seq > 0 ? 1 : 0;
      if (count % (10 * BATCH) === 0) peak = Math.max(peak, retainedHeap());
    }
    expect(count).toBe(total);
    expect(peak - baseline).toBeLessThan(64 * MiB);
  });

  it('verifies the whole chain in flat memory', async () => {
    const baseline = retainedHeap();
    let peak = baseline;
    let calls = 0;
    const report = await t.vault.attestations.verifyChain({
      batchSize: 1000,
      digestOf: (envelope) => {
        calls += 1;
        if (calls % (10 * BATCH) === 0) peak = Math.max(peak, retainedHeap());
        return digestOf(envelope);
      },
    });
    expect(report).toEqual({ ok: true, checked: ROWS + 1, headSeq: ROWS + 1 });
    expect(peak - baseline).toBeLessThan(64 * MiB);
  });
});

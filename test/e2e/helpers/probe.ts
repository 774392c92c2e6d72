/**
 * A client of the API through its Service for the length of a fault: one request at a time, a
 * new one every `intervalMs`, over kept-alive connections (what clients do), each answer counted.
 * A rolling update or a deleted pod must not show through as a refused or reset connection or an
 * error status: the Service should only route to pods that are ready and still serving.
 */
export interface ProbeResult {
  readonly ok: number;
  readonly failed: number;
  /** The first few failures, with when they happened. */
  readonly samples: string[];
}

export function probeApi(url: string, token: string, intervalMs = 100): { stop: () => Promise<ProbeResult> } {
  let ok = 0;
  let failed = 0;
  const samples: string[] = [];
  let running = true;
  const t0 = Date.now();
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      try {
        const r = await fetch(url, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(10_000),
        });
        await r.arrayBuffer();
        if (r.status === 200) ok++;
        else {
          failed++;
          if (samples.length < 5) samples.push(`+${((started - t0) / 1000).toFixed(1)} s: HTTP ${r.status}`);
        }
      } catch (err) {
        failed++;
        const e = err as Error & { cause?: { code?: string; message?: string } };
        if (samples.length < 5)
          samples.push(
            `+${((started - t0) / 1000).toFixed(1)} s: ${e.cause?.code ?? e.cause?.message ?? e.message}`,
          );
      }
      await new Promise((r) => setTimeout(r, Math.max(0, intervalMs - (Date.now() - started))));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { ok, failed, samples };
    },
  };
}

/**
 * Node/V8 flags the controller process runs with, wherever it is started: the image's entry point
 * (hack/image/inputs.ts writes them into its `#!` line), the local stack (hack/stack/stack.ts) and
 * the memory benchmark (bench/controller-memory.ts).
 *
 * `--max-semi-space-size=8` (MiB): V8 sizes the young generation by how much survives scavenges,
 * and a list of 10,000 Runs survives entirely (it is the cache), so V8 grew it to 128 MiB of new
 * space (two 64 MiB semi-spaces) whose pages stay resident, empty, after the list: 105 MB of the
 * controller's 347 MB RSS at 10,000 cached Runs (docs/bench.md, memory). Capped at 8 MiB per
 * semi-space the same cache measured 241 MB; the objects are the same, only promoted sooner.
 * A `#!` line passes at most one argument: keep this to one flag or change the image's entry point.
 */
export const CONTROLLER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/**
 * Environment the service's processes start with (the image's config sets it; the local stack and
 * the memory benches too). glibc reads both at process start only.
 *
 * `MALLOC_ARENA_MAX=2`: glibc gives threads their own malloc arenas (up to eight per core) and keeps
 * what a thread freed in its arena after the thread ends. The controller runs Biscuit in a worker
 * thread that is replaced every few hundred tokens (src/capability/biscuit-host.ts), so each
 * replacement could leave its memory in another arena. With two arenas, 3,000 mints through the
 * worker peaked at 143 MiB RSS against 157 MiB, and 131 against 142 MiB once the worker stopped.
 *
 * `MALLOC_MMAP_THRESHOLD_=131072`: allocations of 128 KiB and more get mappings of their own, which
 * go back to the kernel when freed. By default glibc raises that threshold (up to 32 MiB) each time
 * such a block is freed, so the informer's list pages and watch buffers end up inside the arenas,
 * and what they leave there stays resident. The restarted controller at 2,775 Runs: RSS 294 → 248
 * MiB after the drain, 272 → 234 MiB at rest (docs/bench.md, issue 29, sixth round).
 */
export const PROCESS_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
};

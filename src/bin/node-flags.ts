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

#!/usr/bin/env bash
# Installs the npm dependencies offline-safely (no postinstall downloads) and builds the pinned
# Go tools (kube-apiserver, etcd, kubectl, kube-controller-manager, helm, MinIO, cosign) from the Go
# module proxy into ~/.cache/aibom-vault. Idempotent: a second run installs and builds nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# @contentauth/c2pa-node ships its binary in the tarball; its postinstall would try to download one.
export SKIP_RUST_BUILD=1
if [[ ! -x node_modules/.bin/node || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi
# The project runs on Node 24 from the node@24 devDependency, not the machine's node.
export PATH="$PWD/node_modules/.bin:$PATH"
node --version >&2
bash hack/ensure-tools.sh >/dev/null
# The independent verifiers of the capability-token conformance tests (Java Biscuit, joserfc).
bash hack/ensure-verifiers.sh >/dev/null

#!/usr/bin/env bash
# Installs the npm dependencies offline-safely (no postinstall downloads), builds the pinned Go
# tools (kube-apiserver, etcd, kubectl, kube-controller-manager, helm, MinIO, cosign) from the Go
# module proxy into ~/.cache/aibom-vault, and installs Debian's Chromium for the UI's browser tests
# (test/integration/ui/browser.test.ts; browsers cannot be downloaded by npm here). Idempotent: a
# second run installs and builds nothing.
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
# Headless Chromium for the UI's browser tests (driven by playwright-core at /usr/bin/chromium).
if [[ ! -x /usr/bin/chromium ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing Debian's chromium for the browser tests" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; } >/dev/null
  else
    echo "note: /usr/bin/chromium is missing and this is not root with apt-get: the UI's browser tests will be skipped (install Debian's chromium package to run them)" >&2
  fi
fi

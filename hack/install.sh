#!/usr/bin/env bash
# Installs what a job needs, and nothing more; idempotent (a second run installs and builds nothing).
#
#   bash hack/install.sh          the main job (hack/demo.sh, `npm run stack -- up`): the npm
#                                 dependencies (offline-safe, no postinstall downloads) and the
#                                 stack's Go tools (hack/ensure-tools.sh @stack: kube-apiserver,
#                                 kubectl, kube-controller-manager, etcd, MinIO, the TSA)
#   bash hack/install.sh --node   also the node of `npm run stack -- up --node`: its Go tools
#                                 (@node: kubelet, kube-scheduler, kube-proxy, containerd, pause,
#                                 helm) and Debian's runc, CNI plugins and nft (as root)
#   bash hack/install.sh --test   everything the test suite (hack/test.sh) needs: the above, the
#                                 tools only tests run (@test: helm, cosign, crane, SeaweedFS), the
#                                 independent verifiers of the conformance tests (Java Biscuit,
#                                 joserfc) and Debian's Chromium for the UI's browser tests (as root)
#
# Go tools are built once from the Go module proxy into ~/.cache/aibom-vault (docs/tools.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=main
for arg in "$@"; do
  case $arg in
    --test) mode=test ;;
    --node) [[ $mode == test ]] || mode=node ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $arg (--node, --test)" >&2; exit 2 ;;
  esac
done

# @contentauth/c2pa-node ships its binary in the tarball; its postinstall would try to download one.
export SKIP_RUST_BUILD=1
if [[ ! -x node_modules/.bin/node || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi
# The project runs on Node 24 from the node@24 devDependency, not the machine's node.
export PATH="$PWD/node_modules/.bin:$PATH"
node --version >&2

case $mode in
  main) bash hack/ensure-tools.sh @stack >/dev/null ;;
  node) bash hack/ensure-tools.sh @stack @node >/dev/null ;;
  test) bash hack/ensure-tools.sh @test @node >/dev/null ;;
esac

# The node's Debian packages (runc, CNI plugins, nft); without root the e2e suite says why it skips.
if [[ $mode != main ]]; then
  bash hack/ensure-node-packages.sh >/dev/null || [[ $(id -u) != 0 ]]
fi

if [[ $mode == test ]]; then
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
fi

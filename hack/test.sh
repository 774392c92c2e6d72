#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install, typecheck, lint, then vitest (unit and
# integration projects; the integration project starts one real stack: kube-apiserver + etcd +
# kube-controller-manager, PostgreSQL, MinIO on random loopback ports, torn down at the end).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/install.sh --test
export PATH="$PWD/node_modules/.bin:$PATH"
npm run typecheck
npm run lint
npx vitest run "$@"

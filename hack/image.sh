#!/usr/bin/env bash
# Builds the aibom-vault OCI image without a container engine, reproducibly, into an OCI image
# layout cached under ${AIBOM_VAULT_CACHE:-~/.cache/aibom-vault}/image/ (see hack/image/build.ts
# and docs/image.md). Needs a Debian-family host (apt-get download, dpkg-deb) and npm.
#
#   bash hack/image.sh                  # build (or reuse the cached build of the same inputs)
#   bash hack/image.sh --no-cache       # build again even if cached (checks reproducibility)
#   bash hack/image.sh --out DIR        # also copy the OCI layout to DIR
#   bash hack/image.sh --tag 0.1.0-rc1  # the layout's ref name (default: package.json version)
#
# stdout: layout=, digest=, size=, layers=, cached= lines. Push with crane (built by
# hack/ensure-tools.sh): crane push "$layout" registry.example.com/aibom-vault:0.1.0
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ -x node_modules/.bin/node ]] || bash hack/install.sh >&2
export PATH="$PWD/node_modules/.bin:$PATH"
exec node hack/image/build.ts "$@"

#!/usr/bin/env bash
# Installs (once) the Debian packages the node of `npm run stack -- up --node` and the e2e suite
# run, and prints their versions:
#   runc                          the OCI runtime containerd's runc shim starts (/usr/sbin/runc)
#   containernetworking-plugins   the CNI bridge, host-local and loopback plugins (/usr/lib/cni)
#   nftables                      `nft`, which kube-proxy's nftables mode drives
# Needs root and apt-get (Debian 12 here); as another user it only says what is missing.
# Idempotent: nothing is installed when every binary is present. See docs/install.md "A real node".
set -euo pipefail

declare -A NEED=(
  [/usr/sbin/runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [/usr/lib/cni/host-local]=containernetworking-plugins
  [/usr/lib/cni/loopback]=containernetworking-plugins
  [/usr/sbin/nft]=nftables
)
missing=()
for bin in "${!NEED[@]}"; do
  [[ -x $bin ]] || missing+=("${NEED[$bin]}")
done
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "ensure-node-packages: missing ${missing[*]}: install them as root (apt-get install ${missing[*]}); the node cannot start without them" >&2
    exit 1
  fi
  echo "ensure-node-packages: installing ${missing[*]} (Debian)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "$@" >/dev/null; }
  apt_install "${missing[@]}" || { apt-get -o DPkg::Lock::Timeout=900 update >/dev/null && apt_install "${missing[@]}"; }
fi
for p in runc containernetworking-plugins nftables; do
  echo "$p=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo '?')"
done

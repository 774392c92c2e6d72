#!/usr/bin/env bash
# Builds (once) and prints the paths of the real components used by tests and the local stack:
#   kube-apiserver kubectl kube-controller-manager etcd minio timestamp-authority    (set "stack")
#     litewitness witness-add-log
#   helm cosign crane weed tlog-tiles-check tlog-cosign-check                        (+ set "test")
#   kube-scheduler kubelet kube-proxy containerd ctr containerd-shim-runc-v2 pause   (set "node")
# from the Go module proxy only (pause: compiled with the C compiler from the pinned Kubernetes
# module's build/pause/linux/pause.c), at the versions pinned in hack/versions.env. docs/tools.md.
#
# Usage: hack/ensure-tools.sh [tool|@set...]       (default: all tools; sets: @stack @test @node)
#        hack/ensure-tools.sh --update-modules [tool...]
#            regenerate the wrapper modules' go.mod/go.sum under hack/go/ (after a version bump)
#
# stdout: only `<tool>=<absolute path>` lines, in the order requested.
# stderr: progress; build logs go to $CACHE/logs/ (their tail is printed on failure).
# Cache:  ${AIBOM_VAULT_CACHE:-$HOME/.cache/aibom-vault}
#           bin/<tool>-<version>/<tool>   the binaries
#           go/ (GOPATH, GOMODCACHE), go-build/ (GOCACHE), src/ (build modules), logs/, lock
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"

CACHE=${AIBOM_VAULT_CACHE:-${HOME:?HOME or AIBOM_VAULT_CACHE must be set}/.cache/aibom-vault}
[[ $CACHE == /* ]] || CACHE=$(realpath -m -- "$CACHE") # printed paths must be absolute
# What the local stack (and so the demo) runs; what only the test suite adds (weed: the SeaweedFS
# half of the S3 matrix; `up --s3 seaweedfs` asks for it by name); what only the node
# (`npm run stack -- up --node`, the e2e suite) adds. hack/stack/tools.ts names the same sets.
STACK_TOOLS=(kube-apiserver kubectl kube-controller-manager etcd minio timestamp-authority litewitness
  witness-add-log)
TEST_TOOLS=("${STACK_TOOLS[@]}" helm cosign crane weed tlog-tiles-check tlog-cosign-check)
NODE_TOOLS=(kube-scheduler kubelet kube-proxy containerd ctr containerd-shim-runc-v2 pause helm)
ALL_TOOLS=(kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy etcd helm minio
  cosign crane timestamp-authority weed containerd ctr containerd-shim-runc-v2 pause
  litewitness witness-add-log tlog-tiles-check tlog-cosign-check)
KUBE_TOOLS=(kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy)
CONTAINERD_TOOLS=(containerd ctr containerd-shim-runc-v2)

log() { echo "ensure-tools: $*" >&2; }
run() { echo "+ $*" >&2; "$@"; } # for the build logs
die() { log "error: $*"; exit 1; }

# ---- tool/group metadata -------------------------------------------------------------------

group_of() {
  case $1 in
    kube-apiserver | kubectl | kube-controller-manager | kube-scheduler | kubelet | kube-proxy) echo kubernetes ;;
    containerd | ctr | containerd-shim-runc-v2) echo containerd ;;
    etcd | helm | minio | cosign | crane | timestamp-authority | pause | tlog-cosign-check) echo "$1" ;;
    litewitness | witness-add-log | tlog-tiles-check) echo torchwood ;;
    weed) echo seaweedfs ;; # SeaweedFS's server binary is `weed`
    *) return 1 ;;
  esac
}

# The version that names the cache directory bin/<tool>-<version>/.
group_version() {
  case $1 in
    kubernetes) echo "$KUBERNETES_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    minio) echo "$MINIO_RELEASE" ;;
    cosign) echo "$COSIGN_VERSION" ;;
    crane) echo "$CRANE_VERSION" ;;
    timestamp-authority) echo "$TSA_VERSION" ;;
    containerd) echo "$CONTAINERD_VERSION" ;;
    pause) echo "$PAUSE_VERSION-$KUBERNETES_VERSION" ;;
    seaweedfs) echo "$SEAWEEDFS_VERSION" ;;
    torchwood) echo "$TORCHWOOD_VERSION" ;;
    tlog-cosign-check) echo "$TLOG_FORMATS_VERSION" ;;
  esac
}

major_of() { local v=${1#v}; echo "${v%%.*}"; }

# Module path and module version pinned by the wrapper module of a group.
group_module() {
  case $1 in
    kubernetes) echo "k8s.io/kubernetes" ;;
    etcd) echo "go.etcd.io/etcd/server/v3" ;;
    helm) echo "helm.sh/helm/v$(major_of "$HELM_VERSION")" ;;
    minio) echo "github.com/minio/minio" ;;
    cosign) echo "github.com/sigstore/cosign/v$(major_of "$COSIGN_VERSION")" ;;
    crane) echo "github.com/google/go-containerregistry" ;;
    timestamp-authority) echo "github.com/sigstore/timestamp-authority/v$(major_of "$TSA_VERSION")" ;;
    containerd) echo "github.com/containerd/containerd/v$(major_of "$CONTAINERD_VERSION")" ;;
    seaweedfs) echo "github.com/seaweedfs/seaweedfs" ;;
    torchwood) echo "filippo.io/torchwood" ;;
    tlog-cosign-check) echo "github.com/transparency-dev/formats" ;;
  esac
}
group_module_version() {
  case $1 in
    minio) echo "$MINIO_MODULE_VERSION" ;;
    seaweedfs) echo "$SEAWEEDFS_MODULE_VERSION" ;;
    *) group_version "$1" ;;
  esac
}

# Main package of a tool, as built from inside the wrapper module.
tool_package() {
  case $1 in
    kube-apiserver | kubectl | kube-controller-manager | kube-scheduler | kubelet | kube-proxy) echo "k8s.io/kubernetes/cmd/$1" ;;
    containerd | ctr | containerd-shim-runc-v2) echo "$(group_module containerd)/cmd/$1" ;;
    etcd) echo "aibom-vault.local/tools/etcd" ;; # hack/go/etcd/main.go -> etcdmain.Main
    helm) echo "$(group_module helm)/cmd/helm" ;;
    minio) echo "github.com/minio/minio" ;;
    cosign) echo "$(group_module cosign)/cmd/cosign" ;;
    crane) echo "$(group_module crane)/cmd/crane" ;;
    # hack/go/timestamp-authority/main.go: upstream's server without the fixed :2112 metrics port
    timestamp-authority) echo "aibom-vault.local/tools/timestamp-authority" ;;
    weed) echo "github.com/seaweedfs/seaweedfs/weed" ;;
    litewitness) echo "filippo.io/torchwood/cmd/litewitness" ;;
    # hack/go/torchwood/witness-add-log/main.go: witnessctl's add-log and add-key (witnessctl imports
    # sigsum.org/sigsum-go, which the module proxy here refuses)
    witness-add-log) echo "aibom-vault.local/tools/torchwood/witness-add-log" ;;
    # hack/go/torchwood/tlog-tiles-check/main.go: torchwood's tile client as an independent reader
    tlog-tiles-check) echo "aibom-vault.local/tools/torchwood/tlog-tiles-check" ;;
    # hack/go/tlog-cosign-check/main.go: transparency-dev/formats' cosignature/v1 verifier
    tlog-cosign-check) echo "aibom-vault.local/tools/tlog-cosign-check" ;;
  esac
}

# The Go toolchain a group builds with: GOTOOLCHAIN (local unless AIBOM_VAULT_GOTOOLCHAIN says
# otherwise), or the toolchain versions.env pins for a module that needs a newer Go than the
# machine's; go then downloads that toolchain from the module proxy (golang.org/toolchain).
group_toolchain() {
  case $1 in
    timestamp-authority) echo "$TSA_GO_TOOLCHAIN" ;;
    *) echo "$GOTOOLCHAIN" ;;
  esac
}

# Platforms whose dependencies the wrapper module's go.sum covers (the node's tools are Linux-only).
group_platforms() {
  case $1 in
    containerd) echo linux/amd64 linux/arm64 ;;
    *) echo linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 ;;
  esac
}

group_tools() {
  case $1 in
    kubernetes) echo "${KUBE_TOOLS[*]}" ;;
    containerd) echo "${CONTAINERD_TOOLS[*]}" ;;
    seaweedfs) echo weed ;;
    torchwood) echo "litewitness witness-add-log tlog-tiles-check" ;;
    *) echo "$1" ;;
  esac
}

tool_path() { echo "$CACHE/bin/$1-$(group_version "$(group_of "$1")")/$1"; }

# ---- argument parsing ----------------------------------------------------------------------

update_modules=false
tools=()
for arg in "$@"; do
  case $arg in
    --update-modules) update_modules=true ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    @stack) tools+=("${STACK_TOOLS[@]}") ;;
    @test) tools+=("${TEST_TOOLS[@]}") ;;
    @node) tools+=("${NODE_TOOLS[@]}") ;;
    @*) die "unknown set '$arg' (known: @stack @test @node)" ;;
    -*) die "unknown option $arg" ;;
    *) group_of "$arg" >/dev/null || die "unknown tool '$arg' (known: ${ALL_TOOLS[*]})"; tools+=("$arg") ;;
  esac
done
((${#tools[@]})) || tools=("${ALL_TOOLS[@]}")
# Each tool once, in the order first named.
declare -A seen_tool=()
uniq_tools=()
for t in "${tools[@]}"; do [[ -n ${seen_tool[$t]:-} ]] || { seen_tool[$t]=1; uniq_tools+=("$t"); }; done
tools=("${uniq_tools[@]}")

print_paths() {
  local t
  for t in "${tools[@]}"; do echo "$t=$(tool_path "$t")"; done
}

# ---- fast path: everything cached (no go, no lock) ------------------------------------------

missing=()
for t in "${tools[@]}"; do
  [[ -x $(tool_path "$t") ]] || missing+=("$t")
done
if ! $update_modules && ((${#missing[@]} == 0)); then
  print_paths
  exit 0
fi

# ---- build environment -----------------------------------------------------------------------

command -v go >/dev/null || die "go is not installed (need Go >= 1.26)"
command -v flock >/dev/null || die "flock (util-linux) is not installed"

mkdir -p "$CACHE"/{bin,go,go-build,src,logs,tmp}

export GOPATH=$CACHE/go
export GOMODCACHE=$CACHE/go/pkg/mod
export GOCACHE=$CACHE/go-build
export GOTMPDIR=$CACHE/tmp # go's work dirs: an interrupted build's leftovers are removed below
export GOFLAGS="-mod=mod -modcacherw"
export GOTOOLCHAIN=${AIBOM_VAULT_GOTOOLCHAIN:-local}
export GOWORK=off
export CGO_ENABLED=0
unset GOBIN GOOS GOARCH

# Serialise builds between concurrent callers. The fast path above needs no lock because
# binaries only ever appear through an atomic rename.
exec 9>>"$CACHE/lock"
if ! flock -n 9; then
  log "another ensure-tools is building; waiting for $CACHE/lock"
  flock 9
fi
# Holding the lock, nothing else is building: leftovers in tmp/ are from interrupted runs.
rm -rf "${CACHE:?}/tmp" && mkdir -p "$CACHE/tmp"
trap 'rm -rf "${CACHE:?}/tmp"' EXIT

# The checksum database: keep it when reachable; otherwise rely on the committed go.sum files.
# Probed once, before the first download/build.
sumdb_checked=false
check_sumdb() {
  $sumdb_checked && return 0
  sumdb_checked=true
  if [[ -z ${GOSUMDB:-} ]] && ! curl -fsS -m 5 -o /dev/null https://sum.golang.org/latest 2>/dev/null; then
    log "sum.golang.org unreachable: GOSUMDB=off (hashes are checked against hack/go/*/go.sum)"
    export GOSUMDB=off
  fi
}

# Switches this (sub)shell to the Go toolchain of a group. A pinned toolchain is downloaded as the
# module golang.org/toolchain with the checksum database on (go refuses unverified toolchains; it
# reaches sum.golang.org through the module proxy when the host itself does not resolve), then
# run from the module cache directly, as go's own GOTOOLCHAIN switch does, so that the rest of
# the build keeps this script's GOSUMDB setting.
use_toolchain() {
  local want info dir
  want=$(group_toolchain "$1")
  if [[ $want == go1.* ]]; then
    info=$(cd / && GOTOOLCHAIN=local GOSUMDB=sum.golang.org GOFLAGS=-modcacherw go mod download -json \
      "golang.org/toolchain@v0.0.1-$want.$(go env GOOS)-$(go env GOARCH)" </dev/null) ||
      die "cannot download the Go toolchain $want: $info"
    dir=$(go_json_field Dir <<<"$info")
    [[ -d $dir/bin ]] || die "toolchain $want has no bin/ in $dir"
    # Module zips carry no file modes (go's switch sets these bits on first use too).
    chmod a+x "$dir"/bin/* "$dir"/pkg/tool/*/*
    export PATH=$dir/bin:$PATH
    want=local
  fi
  export GOTOOLCHAIN=$want
}

go_json_field() { sed -n "s/^[[:space:]]*\"$1\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" | head -n1; }

# Replace directives of the upstream module, rewritten for use in a wrapper module: relative
# (in-repository) replacements become the published module at the matching version.
upstream_replaces() {
  local group=$1 gomod=$2
  awk '
    /^replace[ \t]*\($/ { inblock = 1; next }
    inblock && /^\)/ { inblock = 0; next }
    inblock { sub(/\/\/.*/, ""); if (NF) print; next }
    /^replace[ \t]/ { sub(/^replace[ \t]+/, ""); sub(/\/\/.*/, ""); print }
  ' "$gomod" | while read -r line; do
    local left=${line%%=>*} right=${line#*=>}
    left=$(echo $left) right=$(echo $right) # trim
    case $right in
      *FORBIDDEN_DEPENDENCY*) continue ;;
      ./staging/src/*)
        [[ $group == kubernetes ]] || die "unexpected replace in $gomod: $line"
        echo "$left => ${right#./staging/src/} v0.${KUBERNETES_VERSION#v1.}" ;;
      ./* | ../*)
        [[ $group == etcd ]] || die "unexpected replace in $gomod: $line"
        echo "$left => ${left%% *} $ETCD_VERSION" ;;
      *) echo "$left => $right" ;;
    esac
  done
}

# Writes a fresh wrapper module for a group into dir: go.mod pinning the upstream module (with
# its replace directives rewritten) and go.sum.
gen_module() {
  local group=$1 dir=$2 mod ver info gomod goline t
  mod=$(group_module "$group") ver=$(group_module_version "$group")
  rm -rf "$dir" && mkdir -p "$dir"
  copy_local_sources "$group" "$dir"
  echo "+ go mod download -json $mod@$ver"
  info=$(go mod download -json "$mod@$ver" </dev/null)
  gomod=$(go_json_field GoMod <<<"$info")
  [[ -f $gomod ]] || die "cannot download $mod@$ver: $info"
  goline=$(awk '$1 == "go" { print $2; exit }' "$gomod")
  {
    echo "// Wrapper module generated by hack/ensure-tools.sh --update-modules: do not edit, do not run"
    echo "// go mod tidy (it would raise dependency versions above the upstream module's go.mod)."
    echo "// pin: $mod@$ver"
    echo "module aibom-vault.local/tools/$group"
    echo
    echo "go ${goline:-1.26.0}"
    echo
    if [[ ! -f $HACK_DIR/go/$group/main.go ]]; then
      echo "tool ("
      # Packages of the wrapper module itself (hack/go/<group>/<dir>/main.go) need no tool line.
      for t in $(group_tools "$group"); do
        [[ $(tool_package "$t") == aibom-vault.local/* ]] || echo "	$(tool_package "$t")"
      done
      echo ")"
      echo
    fi
    echo "require $mod $ver"
    local reps
    reps=$(upstream_replaces "$group" "$gomod")
    if [[ -n $reps ]]; then
      echo
      echo "replace ("
      sed 's/^/	/' <<<"$reps"
      echo ")"
    fi
  } >"$dir/go.mod"
  # Fill go.sum by loading the packages for the usual platforms. Not `go mod tidy`: it also
  # loads tests of dependencies, which can add modules and raise versions above the upstream
  # go.mod's (seen with minio: golang.org/x/sys v0.32.0 -> v0.47.0). Without tidy, the build
  # list is exactly the upstream module's requirements plus the replacements above.
  local p pkgs=()
  for t in $(group_tools "$group"); do pkgs+=("$(tool_package "$t")"); done
  for p in $(group_platforms "$group"); do
    (cd "$dir" && GOOS=${p%/*} GOARCH=${p#*/} run go list -deps "${pkgs[@]}" </dev/null >/dev/null)
  done
  # The pin must survive (it would only move if a dependency required a newer version).
  grep -qE "^[[:space:]]*(require[[:space:]]+)?$mod $ver([[:space:]]|\$)" "$dir/go.mod" ||
    die "resolving dependencies moved $mod away from $ver in $dir/go.mod"
}

# The wrapper module's own Go sources (main.go, <tool>/main.go), without go.mod/go.sum.
copy_local_sources() {
  local group=$1 dir=$2 f
  [[ -d $HACK_DIR/go/$group ]] || return 0
  for f in "$HACK_DIR/go/$group"/*; do
    case ${f##*/} in go.mod | go.sum) ;; *) cp -R "$f" "$dir/" ;; esac
  done
}

# Whether the committed wrapper module hack/go/<group> pins the version of versions.env.
module_is_current() {
  grep -qxF "// pin: $(group_module "$1")@$(group_module_version "$1")" "$HACK_DIR/go/$1/go.mod" 2>/dev/null
}

# Prepares the build directory of a group: the committed wrapper module when it matches
# versions.env, otherwise a freshly generated one.
prepare_module() {
  local group=$1 dir=$2
  if module_is_current "$group"; then
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$HACK_DIR/go/$group/go.mod" "$HACK_DIR/go/$group/go.sum" "$dir/"
    copy_local_sources "$group" "$dir"
  else
    gen_module "$group" "$dir"
  fi
}

mod_date() { # release time of a module in the build list, as 2006-01-02T15:04:05Z
  go list -m -json "$1" </dev/null | go_json_field Time
}

group_ldflags() {
  local group=$1 dir=$2 v d p minor
  case $group in
    kubernetes)
      v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.} minor=${minor%%.*}
      d=$(cd "$dir" && mod_date k8s.io/kubernetes)
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        printf -- ' -X %s' "$p.gitVersion=$v" "$p.gitMajor=1" "$p.gitMinor=$minor" \
          "$p.gitTreeState=clean" "$p.gitCommit=" "$p.buildDate=$d"
      done ;;
    etcd) ;;
    helm)
      p=$(group_module helm)/internal/version
      printf -- ' -X %s' "$p.version=$HELM_VERSION" "$p.metadata=" "$p.gitTreeState=clean"
      if [[ $(major_of "$HELM_VERSION") == 3 ]]; then # Helm 3 takes the Kubernetes version by -X
        v=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/client-go </dev/null)
        minor=${v#v0.} minor=${minor%%.*}
        for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
          printf -- ' -X %s' "$p.k8sVersionMajor=1" "$p.k8sVersionMinor=$minor"
        done
      fi ;;
    minio)
      # as minio's buildscripts/gen-ldflags.go: Version is the tag's time in RFC 3339
      v=${MINIO_RELEASE#RELEASE.}      # 2025-09-07T16-13-09Z
      d=${v%%T*}T$(tr - : <<<"${v#*T}") # 2025-09-07T16:13:09Z
      p=github.com/minio/minio/cmd
      printf -- ' -X %s' "$p.Version=$d" "$p.ReleaseTag=$MINIO_RELEASE" "$p.CopyrightYear=${v:0:4}" \
        "$p.CommitID=$MINIO_COMMIT" "$p.ShortCommitID=${MINIO_COMMIT:0:12}" ;;
    cosign)
      d=$(cd "$dir" && mod_date "$(group_module cosign)")
      p=sigs.k8s.io/release-utils/version
      printf -- ' -X %s' "$p.gitVersion=$COSIGN_VERSION" "$p.gitTreeState=clean" "$p.buildDate=$d" ;;
    crane) printf -- ' -X %s' "$(group_module crane)/cmd/crane/cmd.Version=$CRANE_VERSION" ;;
    timestamp-authority)
      p=sigs.k8s.io/release-utils/version
      printf -- ' -X %s' "$p.gitVersion=$TSA_VERSION" "$p.gitTreeState=clean" ;;
    containerd)
      # as containerd's Makefile: Version and Package (Revision, the commit, is not known here).
      p=$(group_module containerd)/version
      printf -- ' -X %s' "$p.Version=$CONTAINERD_VERSION" "$p.Package=$(group_module containerd)" ;;
    seaweedfs) printf -- ' -X %s' "github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=$SEAWEEDFS_COMMIT" ;;
    torchwood | tlog-cosign-check) ;;
  esac
}

# Runs the binary's version command; fails unless it prints the expected version.
verify_tool() {
  local t=$1 bin=$2 out want
  case $t in
    kubectl) out=$("$bin" version --client 2>&1) want="Client Version: $KUBERNETES_VERSION" ;;
    kube-* | kubelet) out=$("$bin" --version 2>&1) want="Kubernetes $KUBERNETES_VERSION" ;;
    etcd) out=$("$bin" --version 2>&1) want="etcd Version: ${ETCD_VERSION#v}" ;;
    helm) out=$("$bin" version 2>&1) want="Version:\"$HELM_VERSION\"" ;;
    minio) out=$("$bin" --version 2>&1) want="$MINIO_RELEASE" ;;
    cosign) out=$("$bin" version 2>&1) want="$COSIGN_VERSION" ;;
    crane) out=$("$bin" version 2>&1) want="$CRANE_VERSION" ;;
    timestamp-authority) out=$("$bin" --version 2>&1) want="timestamp-server $TSA_VERSION" ;;
    containerd | ctr) out=$("$bin" --version 2>&1) want="$CONTAINERD_VERSION" ;;
    containerd-shim-runc-v2) out=$("$bin" -v 2>&1) want="$CONTAINERD_VERSION" ;;
    pause) out=$("$bin" -v 2>&1) want="pause.c v$PAUSE_VERSION" ;;
    weed) out=$("$bin" version 2>&1) want="$SEAWEEDFS_VERSION $SEAWEEDFS_COMMIT" ;;
    # No version flags: the module versions the binary was built from (the pin, not a replacement).
    litewitness | witness-add-log | tlog-tiles-check)
      out=$(go version -m "$bin" 2>&1) want="filippo.io/torchwood	$TORCHWOOD_VERSION" ;;
    tlog-cosign-check)
      out=$(go version -m "$bin" 2>&1) want="github.com/transparency-dev/formats	$TLOG_FORMATS_VERSION" ;;
  esac </dev/null
  echo "\$ $t version:"
  echo "$out"
  grep -qF -- "$want" <<<"$out" || { echo "expected '$want' in the version output of $t"; return 1; }
}

# The pod sandbox ("pause") binary, as Kubernetes builds its pause image: build/pause/linux/pause.c
# of the pinned k8s.io/kubernetes module (downloaded through the module proxy, no registry needed),
# compiled static with the flags of build/pause/Makefile. The version must be the Makefile's TAG.
build_pause() {
  local out=$1 info dir tag
  info=$(cd / && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" </dev/null)
  dir=$(go_json_field Dir <<<"$info")
  [[ -f $dir/build/pause/linux/pause.c ]] || die "no build/pause/linux/pause.c in k8s.io/kubernetes@$KUBERNETES_VERSION: $info"
  tag=$(sed -n 's/^TAG ?= *//p' "$dir/build/pause/Makefile")
  [[ $tag == "$PAUSE_VERSION" ]] || die "versions.env PAUSE_VERSION=$PAUSE_VERSION but k8s.io/kubernetes@$KUBERNETES_VERSION builds pause $tag"
  command -v "${CC:-cc}" >/dev/null || die "no C compiler (${CC:-cc}): install build-essential"
  run "${CC:-cc}" -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION-aibom-vault" \
    -o "$out/pause" "$dir/build/pause/linux/pause.c"
  strip "$out/pause" 2>/dev/null || true
}

# Builds every missing tool of a group in one `go build` (the Kubernetes binaries share most
# of their packages) and moves each binary into place atomically.
build_group() {
  local group=$1 ver dir tmp logf ldflags t pkgs=() todo=() start
  ver=$(group_version "$group")
  for t in $(group_tools "$group"); do [[ -x $(tool_path "$t") ]] || todo+=("$t"); done
  ((${#todo[@]})) || return 0
  dir=$CACHE/src/$group-$ver
  logf=$CACHE/logs/$group-$ver.log
  tmp=$(mktemp -d "$CACHE/tmp/$group.XXXXXX")
  for t in "${todo[@]}"; do pkgs+=("$(tool_package "$t")"); done
  check_sumdb
  if [[ $group != pause ]] && ! module_is_current "$group"; then
    log "hack/go/$group/go.mod does not pin $(group_module "$group")@$(group_module_version "$group"):" \
      "generating the module (run hack/ensure-tools.sh --update-modules $todo and commit hack/go/)"
  fi
  log "building ${todo[*]} ($group $ver); log: $logf"
  start=$SECONDS
  # Not `if ! ( ... )`: errexit would be ignored inside the subshell.
  local rc=0
  set +e
  (
    set -euo pipefail
    exec </dev/null >"$logf" 2>&1
    use_toolchain "$group"
    echo "# $(date -u +%FT%TZ) building ${todo[*]}; GOSUMDB=${GOSUMDB:-} GOTOOLCHAIN=$GOTOOLCHAIN GOFLAGS=$GOFLAGS"
    run go version
    if [[ $group == pause ]]; then
      build_pause "$tmp"
    else
      prepare_module "$group" "$dir"
      cd "$dir"
      ldflags="-s -w$(group_ldflags "$group" "$dir")"
      run go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
    fi
    for t in "${todo[@]}"; do verify_tool "$t" "$tmp/$t"; done
  )
  rc=$?
  set -e
  if ((rc != 0)); then
    log "FAILED to build ${todo[*]} ($group $ver). Last lines of $logf:"
    tail -n 40 "$logf" | sed 's/^/    /' >&2
    if grep -q 'requires go >=' "$logf"; then
      log "hint: this Go ($(go env GOVERSION)) is too old; AIBOM_VAULT_GOTOOLCHAIN=auto lets go fetch a newer toolchain"
    fi
    return 1
  fi
  for t in "${todo[@]}"; do
    mkdir -p "$(dirname "$(tool_path "$t")")"
    mv -f "$tmp/$t" "$(tool_path "$t")"
  done
  rm -rf "$tmp"
  log "built ${todo[*]} ($group $ver) in $((SECONDS - start))s"
}

if $update_modules; then
  groups=()
  for t in "${tools[@]}"; do
    g=$(group_of "$t")
    [[ $g == pause ]] && continue # no Go module: compiled from the Kubernetes module's source
    [[ " ${groups[*]} " == *" $g "* ]] || groups+=("$g")
  done
  check_sumdb
  for g in "${groups[@]}"; do
    log "regenerating hack/go/$g (log: $CACHE/logs/gen-$g.log)"
    d=$CACHE/tmp/gen-$g
    set +e
    (set -euo pipefail; use_toolchain "$g"; gen_module "$g" "$d") </dev/null >"$CACHE/logs/gen-$g.log" 2>&1
    rc=$?
    set -e
    if ((rc != 0)); then
      log "FAILED to generate the $g module. Last lines of $CACHE/logs/gen-$g.log:"
      tail -n 40 "$CACHE/logs/gen-$g.log" | sed 's/^/    /' >&2
      exit 1
    fi
    mkdir -p "$HACK_DIR/go/$g"
    cp "$d/go.mod" "$d/go.sum" "$HACK_DIR/go/$g/"
  done
  exit 0
fi

[[ ${MINIO_MODULE_VERSION: -12} == "${MINIO_COMMIT:0:12}" ]] ||
  die "versions.env: MINIO_MODULE_VERSION does not name MINIO_COMMIT"
[[ ${SEAWEEDFS_MODULE_VERSION: -12} == "$SEAWEEDFS_COMMIT" ]] ||
  die "versions.env: SEAWEEDFS_MODULE_VERSION does not name SEAWEEDFS_COMMIT"

# Re-check under the lock (another caller may have built them meanwhile), one group at a time.
failed=()
done_groups=" "
for t in "${missing[@]}"; do
  g=$(group_of "$t")
  [[ $done_groups == *" $g "* ]] && continue
  done_groups+="$g "
  build_group "$g" || failed+=("$g")
done
((${#failed[@]} == 0)) || die "failed to build: ${failed[*]}"
print_paths

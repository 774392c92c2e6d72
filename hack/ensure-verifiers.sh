#!/usr/bin/env bash
# Builds (once) the independent verifiers of the capability-token conformance tests
# (test/conformance/capability/) and prints their paths:
#   biscuit-java=<dir>   the Java Biscuit implementation org.biscuitsec:biscuit (Maven Central) and
#                        test/conformance/capability/BiscuitVerify.java compiled against it
#   vc-python=<python>   a venv with joserfc (PyPI), for test/conformance/capability/vc_verify.py
# Nothing fetched is committed: jars and the venv live in ${AIBOM_VAULT_CACHE:-~/.cache/aibom-vault}.
# Needs java/javac 17+, mvn and python3 with venv (hack/install.sh runs this when they are present).
set -euo pipefail
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HACK_DIR/.." && pwd)
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
CACHE=${AIBOM_VAULT_CACHE:-${HOME:?HOME or AIBOM_VAULT_CACHE must be set}/.cache/aibom-vault}
log() { echo "ensure-verifiers: $*" >&2; }

mkdir -p "$CACHE/verifiers"
exec 9>"$CACHE/verifiers/lock"
flock 9

# ---- Biscuit, Java ------------------------------------------------------------------------------
SRC="$ROOT/test/conformance/capability/BiscuitVerify.java"
SRC_SUM=$(sha256sum "$SRC" | cut -c1-16)
BJ="$CACHE/verifiers/biscuit-java-$BISCUIT_JAVA_VERSION"
if [[ ! -f "$BJ/classes/$SRC_SUM.stamp" ]]; then
  log "building the Java Biscuit verifier (org.biscuitsec:biscuit:$BISCUIT_JAVA_VERSION)"
  rm -rf "$BJ" && mkdir -p "$BJ/classes"
  cat >"$BJ/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.aibom-vault</groupId><artifactId>biscuit-verifier</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.biscuitsec</groupId><artifactId>biscuit</artifactId><version>$BISCUIT_JAVA_VERSION</version></dependency>
  </dependencies>
</project>
POM
  mvn -q -B -f "$BJ/pom.xml" dependency:copy-dependencies -DoutputDirectory="$BJ/lib" -DincludeScope=runtime >&2
  javac -d "$BJ/classes" -cp "$BJ/lib/*" "$SRC" >&2
  touch "$BJ/classes/$SRC_SUM.stamp"
fi
echo "biscuit-java=$BJ"

# ---- VC-JOSE, Python ----------------------------------------------------------------------------
VENV="$CACHE/verifiers/joserfc-$JOSERFC_VERSION"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import joserfc' 2>/dev/null; then
  log "creating the joserfc $JOSERFC_VERSION venv"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "joserfc==$JOSERFC_VERSION" >&2
fi
echo "vc-python=$VENV/bin/python"

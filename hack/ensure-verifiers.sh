#!/usr/bin/env bash
# Builds (once) the independent verifiers of the conformance tests (test/conformance/) and prints
# their paths:
#   biscuit-java=<dir>      the Java Biscuit implementation org.biscuitsec:biscuit (Maven Central) and
#                           test/conformance/capability/BiscuitVerify.java compiled against it
#   vc-python=<python>      a venv with joserfc (PyPI), for test/conformance/capability/vc_verify.py
#   cyclonedx-python=<py>   a venv with cyclonedx-python-lib[json-validation] (PyPI), for
#                           test/conformance/views/cdx_validate.py (the AIBOM's CycloneDX 1.7 view)
#   spdx-tools-java=<jar>   the SPDX project's tools-java jar-with-dependencies (Maven Central):
#                           `java -jar <jar> Verify FILE JSONLD` (the AIBOM's SPDX 3.0.1 view)
#   spdx-verify-all=<dir>   test/conformance/views/SpdxVerifyAll.java compiled against that jar (the
#                           same Verify call over many files in one JVM)
# These are test tools: the demo and the image need none of them.
# Nothing fetched is committed: jars and the venv live in ${AIBOM_VAULT_CACHE:-~/.cache/aibom-vault}.
# Needs java/javac 17+, mvn and python3 with venv (hack/install.sh runs this when they are present).
# A cold run takes about a minute (Maven Central and PyPI downloads); a warm one nothing.
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

# ---- CycloneDX, Python --------------------------------------------------------------------------
CDX_VENV="$CACHE/verifiers/cyclonedx-python-lib-$CYCLONEDX_PYTHON_LIB_VERSION"
if [[ ! -x "$CDX_VENV/bin/python" ]] || ! "$CDX_VENV/bin/python" -c 'import cyclonedx.validation.json, jsonschema' 2>/dev/null; then
  log "creating the cyclonedx-python-lib $CYCLONEDX_PYTHON_LIB_VERSION venv"
  rm -rf "$CDX_VENV"
  python3 -m venv "$CDX_VENV"
  "$CDX_VENV/bin/pip" install -q --disable-pip-version-check \
    "cyclonedx-python-lib[json-validation]==$CYCLONEDX_PYTHON_LIB_VERSION" >&2
fi
echo "cyclonedx-python=$CDX_VENV/bin/python"

# ---- SPDX tools-java ----------------------------------------------------------------------------
SPDX_DIR="$CACHE/verifiers/spdx-tools-java-$SPDX_TOOLS_JAVA_VERSION"
SPDX_JAR="$SPDX_DIR/tools-java-$SPDX_TOOLS_JAVA_VERSION-jar-with-dependencies.jar"
if [[ ! -s "$SPDX_JAR" ]]; then
  log "fetching org.spdx:tools-java:$SPDX_TOOLS_JAVA_VERSION (jar-with-dependencies) from Maven Central"
  rm -rf "$SPDX_DIR" && mkdir -p "$SPDX_DIR"
  mvn -q -B dependency:copy \
    -Dartifact="org.spdx:tools-java:$SPDX_TOOLS_JAVA_VERSION:jar:jar-with-dependencies" \
    -DoutputDirectory="$SPDX_DIR" >&2
fi
SPDX_SRC="$ROOT/test/conformance/views/SpdxVerifyAll.java"
SPDX_SUM=$(sha256sum "$SPDX_SRC" | cut -c1-16)
if [[ ! -f "$SPDX_DIR/classes/$SPDX_SUM.stamp" ]]; then
  rm -rf "$SPDX_DIR/classes" && mkdir -p "$SPDX_DIR/classes"
  javac -d "$SPDX_DIR/classes" -cp "$SPDX_JAR" "$SPDX_SRC" >&2
  touch "$SPDX_DIR/classes/$SPDX_SUM.stamp"
fi
echo "spdx-tools-java=$SPDX_JAR"
echo "spdx-verify-all=$SPDX_DIR/classes"

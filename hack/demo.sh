#!/usr/bin/env bash
# The main job: start the local stack (control plane, PostgreSQL, MinIO, controller, sidecar), create
# the sample Run, drive it to Succeeded as a pipeline would, then fetch its AIBOM through the API and
# verify it offline (digest, runtime signature, C2PA manifest against the stack's CA, attestation ids).
# It ends with the web UI's address and a token to sign in with (a ServiceAccount that audits the
# demo namespace: it may read the runs there and export them with receipts).
# The stack keeps running afterwards: `source .stack/env` to use it, `npm run stack -- down` to stop.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/install.sh
export PATH="$PWD/node_modules/.bin:$PATH"
npm run --silent stack -- up
# shellcheck disable=SC1091
source .stack/env

ns=demo
kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
name="sample-run-$(date +%s)"
sed "s/name: sample-run$/name: $name/" manifests/samples/run.yaml | kubectl apply -n "$ns" -f - >/dev/null
echo "== created Run $ns/$name; driving it through its steps"
sample-pipeline "$ns/$name"
kubectl wait -n "$ns" "run/$name" --for=condition=AIBOMReady --timeout=120s >/dev/null
run_id=$(kubectl get run -n "$ns" "$name" -o jsonpath='{.metadata.uid}')
echo
kubectl get runs -n "$ns" "$name"
echo
kubectl get attestations -n "$ns" -l "vault.service.dev/run=$name"
out=".stack/aibom-$run_id"
echo
service-ctl aibom fetch --run "$run_id" --out "$out"
service-ctl verify --aibom "$out"
echo
echo "== AIBOM of run $run_id ($out/aibom.json):"
node -e 'process.stdout.write(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")),null,2)+"\n")' "$out/aibom.json"

# A user of the web UI: a ServiceAccount bound to the auditor role in the demo namespace only.
kubectl get serviceaccount -n "$ns" demo-auditor >/dev/null 2>&1 || kubectl create serviceaccount -n "$ns" demo-auditor >/dev/null
kubectl get rolebinding -n "$ns" demo-auditor >/dev/null 2>&1 ||
  kubectl create rolebinding -n "$ns" demo-auditor --clusterrole=aibom-vault-auditor --serviceaccount="$ns:demo-auditor" >/dev/null
ui_token=$(kubectl create token -n "$ns" demo-auditor --duration=8h)
echo
echo "stack is still up: source .stack/env; npm run stack -- down to stop it"
echo
echo "== Web UI: $SERVICE_API_URL/ui/"
echo "Open it, sign in with the token below (ServiceAccount $ns/demo-auditor: reads and exports namespace $ns, valid 8 h),"
echo "open run $name, then its AIBOM drawer, and press \"Export with receipts\". Verify the download offline:"
echo "  source .stack/env && service-ctl keys fetch --out trust && service-ctl verify evidence-$run_id-aibom.tar --trust-anchor trust/ca.pem"
echo
echo "$ui_token"

#!/usr/bin/env bash
# aibom-vault on a local kind cluster, for users WITH Docker (the test suite does not use this: it
# runs a real kube-apiserver without containers, see hack/stack/).
#
#   hack/kind.sh [up]   create the cluster (if needed), build and load the image, run PostgreSQL and
#                       MinIO in it, create the signer Secret (dev CA -> leaf), helm install the chart,
#                       apply manifests/samples/run.yaml and drive that Run to Succeeded
#   hack/kind.sh down   delete the cluster
#
# Needs: docker, kind, kubectl, helm (v3.8+ or v4), and what hack/image.sh needs (npm, a Debian-family
# host for apt-get download). The dev PKI is generated on the host (hack/dev-pki.ts) and the bucket
# with the image's own code; DRIVE=1 runs the sample pipeline (hack/sample-pipeline.ts, a
# development tool, not part of the image) from the host. Re-running `up` is safe (idempotent).
# Settings (environment): KIND_CLUSTER, IMAGE, NAMESPACE, RELEASE, DEMO_NAMESPACE, POSTGRES_IMAGE,
# MINIO_IMAGE, DRIVE=0 (only apply the sample Run, do not drive it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=hack/versions.env
source hack/versions.env

CLUSTER=${KIND_CLUSTER:-aibom-vault}
IMAGE=${IMAGE:-aibom-vault:dev}
NS=${NAMESPACE:-aibom-vault-system}
RELEASE=${RELEASE:-aibom-vault}
DEMO_NS=${DEMO_NAMESPACE:-demo}
POSTGRES_IMAGE=${POSTGRES_IMAGE:-postgres:18-bookworm}
# The MinIO release the test stack pins (hack/versions.env).
MINIO_IMAGE=${MINIO_IMAGE:-quay.io/minio/minio:${MINIO_RELEASE}}
DRIVE=${DRIVE:-1}
CTX="kind-${CLUSTER}"
STATE=.kind # kubeconfig-free local state: the dev CA certificate (trust anchor)

log() { printf '\n== %s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}
k() { kubectl --context "$CTX" "$@"; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is required on PATH"; }
# 16 random bytes as hex (od reads exactly what it needs: no SIGPIPE under pipefail).
rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
secret_value() { k -n "$NS" get secret "$1" -o "jsonpath={.data.$2}" | base64 -d; }

down() {
  need kind
  kind delete cluster --name "$CLUSTER"
  rm -rf "$STATE"
}

up() {
  for tool in docker kind kubectl helm; do need "$tool"; done
  mkdir -p "$STATE"

  log "kind cluster $CLUSTER"
  if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    kind create cluster --name "$CLUSTER" --wait 120s
  fi

  log "image $IMAGE (hack/image.sh, then through a throwaway local registry into docker and kind)"
  local layout crane port reg
  layout=$(bash hack/image.sh --tag "${IMAGE##*:}" | sed -n 's/^layout=//p')
  crane=$(bash hack/ensure-tools.sh crane | sed -n 's/^crane=//p')
  port=$((20000 + RANDOM % 20000))
  "$crane" registry serve --address "127.0.0.1:$port" >"$STATE/registry.log" 2>&1 &
  reg=$!
  sleep 1
  "$crane" push "$layout" "127.0.0.1:$port/aibom-vault:${IMAGE##*:}"
  "$crane" pull "127.0.0.1:$port/aibom-vault:${IMAGE##*:}" "$STATE/image.tar"
  kill "$reg"
  docker load -i "$STATE/image.tar"
  docker tag "127.0.0.1:$port/aibom-vault:${IMAGE##*:}" "$IMAGE"
  kind load docker-image "$IMAGE" --name "$CLUSTER"

  k create namespace "$NS" --dry-run=client -o yaml | k apply -f -
  k create namespace "$DEMO_NS" --dry-run=client -o yaml | k apply -f -

  log "PostgreSQL ($POSTGRES_IMAGE) and MinIO ($MINIO_IMAGE) in $NS (development only: no persistence)"
  if ! k -n "$NS" get secret dev-backing >/dev/null 2>&1; then
    k -n "$NS" create secret generic dev-backing \
      --from-literal=postgres-password="$(rand)" \
      --from-literal=minio-user=vault \
      --from-literal=minio-password="$(rand)"
  fi
  k -n "$NS" apply -f - <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: { name: postgres, labels: { app: postgres } }
spec:
  selector: { matchLabels: { app: postgres } }
  template:
    metadata: { labels: { app: postgres } }
    spec:
      containers:
        - name: postgres
          image: ${POSTGRES_IMAGE}
          env:
            - { name: POSTGRES_USER, value: vault }
            - { name: POSTGRES_DB, value: vault }
            - name: POSTGRES_PASSWORD
              valueFrom: { secretKeyRef: { name: dev-backing, key: postgres-password } }
          ports: [{ name: postgres, containerPort: 5432 }]
          readinessProbe:
            exec: { command: [pg_isready, -U, vault, -d, vault] }
            periodSeconds: 3
          volumeMounts: [{ name: data, mountPath: /var/lib/postgresql }]
      volumes: [{ name: data, emptyDir: {} }]
---
apiVersion: v1
kind: Service
metadata: { name: postgres }
spec:
  selector: { app: postgres }
  ports: [{ name: postgres, port: 5432, targetPort: postgres }]
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: minio, labels: { app: minio } }
spec:
  selector: { matchLabels: { app: minio } }
  template:
    metadata: { labels: { app: minio } }
    spec:
      containers:
        - name: minio
          image: ${MINIO_IMAGE}
          args: [server, /data, --console-address, ':9001']
          env:
            - name: MINIO_ROOT_USER
              valueFrom: { secretKeyRef: { name: dev-backing, key: minio-user } }
            - name: MINIO_ROOT_PASSWORD
              valueFrom: { secretKeyRef: { name: dev-backing, key: minio-password } }
          ports: [{ name: s3, containerPort: 9000 }, { name: console, containerPort: 9001 }]
          readinessProbe:
            httpGet: { path: /minio/health/ready, port: s3 }
            periodSeconds: 3
          volumeMounts: [{ name: data, mountPath: /data }]
      volumes: [{ name: data, emptyDir: {} }]
---
apiVersion: v1
kind: Service
metadata: { name: minio }
spec:
  selector: { app: minio }
  ports: [{ name: s3, port: 9000, targetPort: s3 }, { name: console, port: 9001, targetPort: console }]
EOF
  k -n "$NS" rollout status deployment/postgres --timeout=180s
  k -n "$NS" rollout status deployment/minio --timeout=180s

  local pg_password minio_user minio_password
  pg_password=$(secret_value dev-backing postgres-password)
  minio_user=$(secret_value dev-backing minio-user)
  minio_password=$(secret_value dev-backing minio-password)

  log "Secrets the chart reads: ${RELEASE}-database, ${RELEASE}-s3"
  k -n "$NS" create secret generic "${RELEASE}-database" \
    --from-literal=DATABASE_URL="postgres://vault:${pg_password}@postgres.${NS}.svc:5432/vault" \
    --dry-run=client -o yaml | k apply -f -
  k -n "$NS" create secret generic "${RELEASE}-s3" \
    --from-literal=S3_ENDPOINT="http://minio.${NS}.svc:9000" \
    --from-literal=S3_ACCESS_KEY="$minio_user" \
    --from-literal=S3_SECRET_KEY="$minio_password" \
    --dry-run=client -o yaml | k apply -f -

  log "bucket aibom-vault (created with the image's own S3 client)"
  k -n "$NS" delete pod mkbucket --ignore-not-found --wait=true >/dev/null
  k -n "$NS" run mkbucket --rm -i --restart=Never --quiet \
    --image="$IMAGE" --image-pull-policy=Never \
    --env="S3_ACCESS_KEY=$minio_user" --env="S3_SECRET_KEY=$minio_password" \
    -- node --input-type=module -e "
      import { S3Client } from '/app/dist/src/blob/s3.js';
      const c = new S3Client({ endpoint: 'http://minio.${NS}.svc:9000',
        accessKey: process.env.S3_ACCESS_KEY, secretKey: process.env.S3_SECRET_KEY });
      await c.createBucket('aibom-vault');
      c.close();
      console.log('bucket aibom-vault ready');"

  log "signer Secret ${RELEASE}-signer (dev CA -> leaf, ECDSA P-256, EKU emailProtection + documentSigning)"
  if ! k -n "$NS" get secret "${RELEASE}-signer" >/dev/null 2>&1; then
    # hack/dev-pki.ts (a development tool, not in the image) generates the chain in memory, run
    # with the project's Node 24; the leaf is valid for 30 days. Production: cert-manager
    # (signer.certManager) or your own CA.
    [[ -x node_modules/.bin/node ]] || bash hack/install.sh
    node_modules/.bin/node --input-type=module -e "
      import { generateDevPki, toSecretData } from '$PWD/hack/dev-pki.ts';
      const [namespace, name] = process.argv.slice(1);
      const pki = await generateDevPki({ notAfter: new Date(Date.now() + 30 * 86400000) });
      process.stdout.write(JSON.stringify({ apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls',
        metadata: { name, namespace }, data: toSecretData(pki) }));" "$NS" "${RELEASE}-signer" |
      k apply -f -
  fi
  secret_value "${RELEASE}-signer" 'ca\.crt' >"$STATE/ca.crt"

  log "helm upgrade --install $RELEASE charts/aibom-vault"
  local installed=0
  helm status "$RELEASE" --kube-context "$CTX" --namespace "$NS" >/dev/null 2>&1 && installed=1
  helm upgrade --install "$RELEASE" charts/aibom-vault \
    --kube-context "$CTX" --namespace "$NS" \
    --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never \
    --set transparency.writer=true \
    --wait --timeout 5m
  if [[ "$installed" == 1 ]]; then
    # Re-run: the image was rebuilt under the same tag; restart so the pods run it.
    k -n "$NS" rollout restart "deployment/${RELEASE}-controller" "deployment/${RELEASE}-api"
    k -n "$NS" rollout status "deployment/${RELEASE}-controller" --timeout=300s
    k -n "$NS" rollout status "deployment/${RELEASE}-api" --timeout=300s
  fi

  log "sample Run $DEMO_NS/sample-run"
  k -n "$DEMO_NS" apply -f manifests/samples/run.yaml
  if [[ "$DRIVE" == 1 ]]; then
    # A pipeline identity: it may read Runs and write their status, nothing else.
    k -n "$DEMO_NS" apply -f - <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: { name: pipeline }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: pipeline }
rules:
  - apiGroups: [vault.service.dev]
    resources: [runs]
    verbs: [get, list, watch]
  - apiGroups: [vault.service.dev]
    resources: [runs/status]
    verbs: [get, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: pipeline }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: pipeline }
subjects: [{ kind: ServiceAccount, name: pipeline, namespace: ${DEMO_NS} }]
EOF
    # The sample pipeline is a development tool (hack/sample-pipeline.ts), not in the image: it runs
    # from this checkout (npm ci) under the pipeline identity above.
    [ -x node_modules/.bin/node ] || die "DRIVE=1 runs hack/sample-pipeline.ts on Node 24: npm ci first"
    kc="$STATE/pipeline.kubeconfig"
    k config view --minify --raw >"$kc"
    KUBECONFIG="$kc" kubectl config set-credentials pipeline \
      --token="$(k -n "$DEMO_NS" create token pipeline)" >/dev/null
    KUBECONFIG="$kc" kubectl config set-context --current --user=pipeline >/dev/null
    KUBECONFIG="$kc" node_modules/.bin/node hack/sample-pipeline.ts "$DEMO_NS/sample-run"
    rm -f "$kc"
    k -n "$DEMO_NS" wait run/sample-run --for=condition=AIBOMReady --timeout=180s
  fi

  log "done"
  k get runs,attestations -n "$DEMO_NS"
  cat <<EOF

Next:
  kubectl --context $CTX get runs,attestations -A
  kubectl --context $CTX -n $NS port-forward svc/$RELEASE 8080:8080 &
  # the API authorises callers per namespace: let the demo pipeline identity read its records
  kubectl --context $CTX -n $DEMO_NS create rolebinding pipeline-viewer --clusterrole=${RELEASE}-viewer --serviceaccount=$DEMO_NS:pipeline
  export SERVICE_API_URL=http://127.0.0.1:8080 SERVICE_TRUST_ANCHOR=\$PWD/$STATE/ca.crt
  export SERVICE_TOKEN=\$(kubectl --context $CTX -n $DEMO_NS create token pipeline)
  npm run service-ctl -- get --run \$(kubectl --context $CTX -n $DEMO_NS get run sample-run -o jsonpath='{.metadata.uid}')   # needs npm ci
Delete everything: hack/kind.sh down
EOF
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *) die "usage: hack/kind.sh [up|down]" ;;
esac

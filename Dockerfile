# gatehouse: the reverse-proxy sidecar. Build: docker build -t gatehouse:local .
# Run: docker run -v "$PWD/config:/etc/gatehouse:ro" -p 8080:8080 gatehouse:local
# with `listen: 0.0.0.0:8080` (the default) in config/proxy.config.yaml: listen must be 0.0.0.0 in
# a container, whose 127.0.0.1 is its own, so that -p reaches it.
# The base image is pinned to one Node release, so a rebuild runs what was tested; change it here.
FROM node:24.21.0-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
RUN npm run build

FROM node:24.21.0-slim
WORKDIR /app
# The config is read from a mounted folder (an editor's save-by-rename then reaches the container);
# Node keeps the modules' compiled code in /app/.compile-cache, filled below, so starts skip it.
ENV NODE_ENV=production \
    GATEHOUSE_CONFIG=/etc/gatehouse/proxy.config.yaml \
    NODE_COMPILE_CACHE=/app/.compile-cache
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
# The documented example, for reference only: its demo client's secret is published, so the image
# never runs it by default.
COPY proxy.config.yaml config.schema.json ./
RUN mkdir .compile-cache && chown 1000:1000 .compile-cache
# The node image's "node" user, by number: Kubernetes' runAsNonRoot can only verify a numeric user.
USER 1000:1000
# Node keeps a compile cache per user: it is filled by the user that runs gatehouse, and read at
# every start, also from a read-only root file system.
RUN node dist/src/cli.js check --config proxy.config.yaml
EXPOSE 8080 9901
# Node's own fetch, so the image needs no curl or wget; the port (admin_listen's, which a full
# public listener never takes) and the path are the defaults.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9901/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["run"]

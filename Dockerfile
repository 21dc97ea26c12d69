# gatehouse: the reverse-proxy sidecar. Build: docker build -t gatehouse .
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
RUN npm run build

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist/src ./dist/src
COPY proxy.config.yaml config.schema.json ./
USER node
EXPOSE 8080 9901
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["--config", "/app/proxy.config.yaml"]

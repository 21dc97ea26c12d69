/**
 * The layers of src/, bottom to top, enforced by `npm test` (README "Architecture"): a module may
 * import its own layer's modules and lower layers', never a higher layer's; no cycles; no stage
 * imports another stage.
 */
const LAYERS = [
  // 0: helpers with no knowledge of gatehouse's request path; the file format.
  "^src/(http/|clock\\.ts|metrics\\.ts|request-metrics\\.ts|log\\.ts|config/(duration|key-path|problem|schema|schema-checks|schema-fields|limits-schema|limits-in-force|redis-schema|tracing-schema|issuers-schema|dpop-schema|token-from-schema|upstream-schema|cross-checks|route-methods|json-schema|environment|named-files|warnings|load|parse-worker|parse-off-thread|regular-file)\\.ts)",
  // 1: pure domain logic.
  "^src/(routes|language)/",
  // 2: the shared vocabulary: replies, error codes, the request scope, services.
  "^src/core/",
  // 3: domain modules with effects (keys, counters, the upstream pool, span export).
  "^src/(tokens|limits|upstream|tracing|websocket)/",
  // 4: the config snapshot, compiled from the file, and its store.
  "^src/config/(snapshot|redis|store|file-watch|reload-failures|bound-addresses|write-schema)\\.ts",
  // 5: the stages of the request path, and their ordered list.
  "^src/stages/",
  // 6: the composition root and the front ends.
  "^src/(admin/|lifecycle/|server\\.ts|cli|demo\\.ts)",
];

const climbing = LAYERS.flatMap((lower, index) =>
  LAYERS.slice(index + 1).map((higher) => ({
    name: `layer-${index}-imports-higher`,
    comment: "a lower layer never imports a higher one",
    severity: "error",
    from: { path: lower },
    to: { path: higher },
  })),
);

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "imports point one way",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "stage-imports-stage",
      comment: "stages are independent; only the ordered list (src/stages/index.ts) names them",
      severity: "error",
      from: { path: "^src/stages/(?!index\\.ts)" },
      to: { path: "^src/stages/", pathNot: "^src/stages/index\\.ts$" },
    },
    {
      name: "unlayered",
      comment: "every module of src/ belongs to a layer",
      severity: "error",
      from: { path: "^src/", pathNot: LAYERS.join("|") },
      to: { path: "^src/" },
    },
    ...climbing,
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "^(dist|node_modules)/" },
  },
};

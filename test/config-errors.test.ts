import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { checkConfigFixtures } from "./helpers/config-fixtures.js";
import { parseConfigText } from "../src/config/load.js";
import { loadSnapshot } from "../src/config/snapshot.js";

// One fixture per class of config error, each with the exact lines `gatehouse check` prints
// (FILE:LINE:COL message), so a changed message or position is a visible change.
const DIR = "test/fixtures/config";
const expected: Record<string, string[]> = {
  "admin-hosts-port.yaml": [
    "5:5 admin_hosts[1]: must be a host name such as gatehouse.internal, without a scheme, port or path",
    "6:5 admin_hosts[2]: must be a host name such as gatehouse.internal, without a scheme, port or path",
  ],
  "assertion-lifetime-too-long.yaml": [
    "4:27 tokens.assertion_max_lifetime: must be at most 1d: a used assertion's jti is held until its exp",
  ],
  "alias-bomb.yaml": ["1:1 YAML: Excessive alias count indicates a resource exhaustion attack"],
  "bad-cidr.yaml": [
    "3:19 trusted_proxies[0]: must be an IP address or a CIDR block, such as 10.0.0.0/8 or fd00::/8",
  ],
  "bad-duration.yaml": [
    "3:12 upstream.timeout: must be a duration greater than zero, such as 500ms, 30s, 1m, 1h or 1d",
  ],
  "bad-header-name.yaml": [
    "3:20 upstream.identity_header: must be an HTTP header name, such as X-Client-Id",
  ],
  "bad-listen.yaml": ["3:9 listen: must be HOST:PORT, such as 0.0.0.0:8080 or [::]:8080"],
  "bad-url-scheme.yaml": ["2:8 upstream.url: must use http or https, not ftp"],
  "bad-url-userinfo.yaml": ["2:8 upstream.url: must not contain a user name or password"],
  "bad-url.yaml": ["2:8 upstream.url: must be an absolute URL, such as http://127.0.0.1:3000"],
  "server-name-without-tls.yaml": [
    "3:16 upstream.server_name: needs an https:// url: an http:// upstream has no TLS name",
  ],
  "server-name-not-a-host.yaml": [
    "3:16 upstream.server_name: must be a DNS host name, such as api.internal.example",
  ],
  "client-jwks-hmac.yaml": [
    "5:16 clients[0].jwks_file: keys[0] holds private key material; the file must hold public keys only",
  ],
  "client-secret-and-jwks.yaml": [
    "6:16 clients[0].jwks_file: is for a client without a secret: remove secret_hash/secret_env",
  ],
  "trusted-issuers.yaml": [
    "6:15 tokens.trusted_issuers[0].issuer: must be an https URL without query, fragment or userinfo (http only on a loopback host), such as https://idp.example.com/realms/corp",
    "7:27 tokens.trusted_issuers[0].algorithms[1]: must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (none and HS* are never accepted from a provider)",
    "7:33 tokens.trusted_issuers[0].algorithms[2]: must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (none and HS* are never accepted from a provider)",
    "8:13 tokens.trusted_issuers[1].name: is already used by trusted_issuers[0]",
    "10:17 tokens.trusted_issuers[1].jwks_uri: must be an https URL without query, fragment or userinfo (http only on a loopback host), such as https://idp.example.com/certs",
    "11:13 tokens.trusted_issuers[1].plan: names no plan; known plans: (none)",
    "12:13 tokens.trusted_issuers[2].name: must be 1 to 32 characters from a-z 0-9 -",
    "13:15 tokens.trusted_issuers[2].issuer: is already used by trusted_issuers[1]",
    "16:13 clients[0].issuer: names no trusted issuer; known: corp, Own",
    "18:13 clients[1].issuer: is for a client that authenticates to that provider: remove secret_hash, secret_env and jwks_file",
    "19:17 clients[1].secret_env: names BILLING_SECRET, which is not set",
  ],
  "client-duplicate-id.yaml": ["6:9 clients[1].id: is already used by clients[0]"],
  "client-no-secret.yaml": [
    "4:5 clients[0]: needs secret_hash (from gatehouse hash-secret), secret_env or jwks_file, or issuer for a provider's client",
  ],
  "client-resource-fragment.yaml": [
    "6:17 clients[0].resources[0]: must be an absolute URI without a fragment, such as https://api.example.com",
  ],
  "client-unknown-plan.yaml": ["6:11 clients[0].plan: names no plan; known plans: standard"],
  "duplicate-key.yaml": ["6:5 duplicate key: each key may appear only once in a mapping"],
  "empty-value.yaml": ["3:3 upstream.timeout: must be a duration such as 500ms, 30s, 1m, 1h or 1d"],
  "every-kind.yaml": [
    "3:12 upstream.timeout: must be a duration greater than zero, such as 500ms, 30s, 1m, 1h or 1d",
    '6:15 tokens.signing.key_file: cannot read "./missing-signing.pem" (ENOENT)',
    "9:17 clients[0].secret_env: names REPORTING_SECRET_NOT_SET, which is not set",
    "10:11 clients[0].plan: names no plan; known plans: standard",
    '18:11 routes[0].cost: is 6, above client "reporting"\'s rate limit "default" (5 per 1s): its requests to this route can never be served',
  ],
  "health-admin-path.yaml": [
    "4:18 health.liveness_path: is a path of the admin API, which serves the health paths too",
    "5:19 health.readiness_path: is a path of the admin API, which serves the health paths too",
  ],
  "hs256-key-file.yaml": [
    "6:15 tokens.signing.key_file: is for EdDSA and ES256; HS256 uses secret_env",
  ],
  "language-code.yaml": [
    "4:19 languages.supported[1]: must be a two- or three-letter lower-case language code, such as fr",
  ],
  "language-default-unsupported.yaml": [
    "5:12 languages.default: must be one of the supported languages (en, fr)",
  ],
  "limit-zero.yaml": ["5:26 plans.standard.rate_limit.limit: must be at least 1"],
  "tracing.yaml": [
    "4:18 tracing.otlp_endpoint: must use http or https, not grpc",
    "5:17 tracing.sample_ratio: must be a number from 0 to 1",
  ],
  "tracing-endpoint-credentials.yaml": [
    "4:18 tracing.otlp_endpoint: must not contain a user name or password; use OTEL_EXPORTER_OTLP_HEADERS",
    "4:18 tracing.otlp_endpoint: must not contain a query or a fragment",
  ],
  "many-errors.yaml": [
    '4:3 upstream.timout: unknown key; did you mean "timeout"? (allowed here: url, timeout, max_sockets, idle_timeout, server_name, identity_header, issuer_header, scopes_header, forward_authorization, websocket, underscore_headers)',
    "5:9 listen: must be HOST:PORT with a port from 0 to 65535, such as 0.0.0.0:8080 or [::]:8080",
    '7:11 routes[0].path: must not contain "." or ".." segments',
    "10:12 languages.default: must be one of the supported languages (en, fr, de, es, it)",
  ],
  "missing-upstream.yaml": [
    "1:1 upstream: is required, with at least url: the service gatehouse protects",
  ],
  "missing-url.yaml": [
    "2:3 upstream.url: is required: the upstream's base URL, such as http://127.0.0.1:3000",
  ],
  "own-path-collision.yaml": ["4:19 health.readiness_path: is the same path as tokens.path"],
  "plan-name-number.yaml": ["5:26 plans.1.rate_limit.limit: must be at least 1"],
  "plan-name-unicode.yaml": ["4:3 plans.tarifé: must be a plan name"],
  "plan-empty.yaml": ["4:10 plans.empty: needs rate_limit (or rate_limits), quota or both"],
  "proto-key.yaml": [
    "3:1 __proto__: unknown key (allowed here: listen, admin_listen, admin_token_env, admin_hosts, max_connections, trusted_proxies, upstream, tokens, clients, plans, routes, languages, limits, health, shutdown, logging, tracing)",
  ],
  "quota-period.yaml": ["5:34 plans.standard.quota.period: must be hour, day or month"],
  "redis-ca-file-missing.yaml": [
    '8:16 limits.redis.tls.ca_file: cannot read "missing-ca.pem" (ENOENT)',
  ],
  "redis-key-prefix-brace.yaml": [
    '6:17 limits.redis.key_prefix: must not contain "{" or "}": Redis Cluster would take a brace for the hash tag that keeps all of a client\'s keys on one node',
  ],
  "redis-mixed-tls.yaml": [
    "6:14 limits.redis.cluster: mixes redis:// and rediss://: TLS is used for every node or for none",
  ],
  "redis-node-credentials.yaml": [
    "6:15 limits.redis.cluster[0]: must not contain a user name or password; use username and password_env",
  ],
  "redis-password-env-unset.yaml": [
    "7:19 limits.redis.password_env: names GATEHOUSE_TEST_UNSET_REDIS_PASSWORD, which is not set",
  ],
  "redis-sentinel-no-master.yaml": [
    "7:7 limits.redis.sentinel.master_name: is required with sentinel.nodes, such as mymaster",
  ],
  "redis-tls-plain-url.yaml": [
    "8:7 limits.redis.tls: needs rediss:// URLs: a redis:// URL connects without TLS",
  ],
  "redis-two-places.yaml": [
    "7:14 limits.redis.cluster: cannot be given with url: exactly one of url, cluster or sentinel.nodes says where Redis is",
  ],
  "redis-url.yaml": ["6:10 limits.redis.url: must be a redis:// or rediss:// URL"],
  "redis-url-invalid.yaml": [
    "6:10 limits.redis.url: must be an absolute URL, such as redis://127.0.0.1:6379",
  ],
  "redis-url-query.yaml": ["6:10 limits.redis.url: must not contain a query or a fragment"],
  "route-bad-method.yaml": [
    "5:20 routes[0].methods[1]: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
  ],
  "route-cost-above-limit.yaml": [
    '16:11 routes[1].cost: is 10, above client "reporting"\'s rate limit "default" (5 per 1s): its requests to this route can never be served',
  ],
  "route-cost-anonymous.yaml": [
    "16:11 routes[1].cost: is 4, above the anonymous plan's quota (3 per hour): its requests to this route can never be served",
  ],
  "route-cost-anonymous-rate.yaml": [
    '12:11 routes[0].cost: is 3, above the anonymous plan\'s rate limit "burst" (2 per 1s): its requests to this route can never be served',
  ],
  "route-cost-default-plan.yaml": [
    '17:11 routes[0].cost: is 3, above client "reporting"\'s quota (2 per day): its requests to this route can never be served',
  ],
  "route-dot-segment.yaml": ['4:11 routes[0].path: must not contain "." or ".." segments'],
  "route-encoded-slash.yaml": ["4:11 routes[0].path: must not contain %2F, %5C or %00"],
  "route-inner-double-star.yaml": [
    '4:11 routes[0].path: "**" may only be the last segment, such as /v1/reports/**',
  ],
  "route-methods-overlap.yaml": [
    "9:14 routes[2].methods: POST, GET are also in routes[0] of the same path; list each of a path's methods in one entry only",
    "13:14 routes[4].methods: PUT is also in routes[2] of the same path; list each of a path's methods in one entry only",
  ],
  "route-no-methods.yaml": ["5:14 routes[0].methods: must list at least one method"],
  "route-no-slash.yaml": ['4:11 routes[0].path: must start with "/"'],
  "route-scopes-anonymous.yaml": [
    "9:13 routes[0].scopes: needs auth: bearer; an anonymous request has no scopes",
  ],
  "route-scopes-both.yaml": ["9:17 routes[0].scopes_any: cannot be combined with scopes; keep one"],
  "scope-default-not-granted.yaml": [
    "9:22 clients[0].default_scopes[0]: is not among the client's scopes",
  ],
  "scope-token.yaml": [
    '4:12 tokens.scopes[0]: must be a scope token: printable ASCII without spaces, " or \\, such as items:read',
  ],
  "scope-unknown.yaml": [
    "8:26 clients[0].scopes[1]: names a scope tokens.scopes does not list (known: items:read)",
    "12:30 routes[0].scopes_any[1]: names a scope tokens.scopes does not list (known: items:read)",
  ],
  "route-partial-wildcard.yaml": [
    '4:11 routes[0].path: "*" and "**" must be whole path segments, such as /v1/items/*',
  ],
  "signing-algorithm.yaml": ["5:16 tokens.signing.algorithm: must be EdDSA, ES256 or HS256"],
  "state-file-redis.yaml": [
    "5:15 limits.state_file: is for the memory store; Redis keeps its own counters",
  ],
  "translation-max.yaml": ["5:10 languages.translation.max: must be at least 1"],
  "unknown-key-deep-list.yaml": [
    "11:7 clients[1].quota.burst: unknown key (allowed here: limit, period)",
  ],
  "unknown-key-nested.yaml": [
    '6:5 routes[0].cots: unknown key; did you mean "cost"? (allowed here: path, methods, cost, auth, scopes, scopes_any, dpop, websocket, token_from, origins)',
  ],
  "unknown-key.yaml": [
    '3:3 upstream.timout: unknown key; did you mean "timeout"? (allowed here: url, timeout, max_sockets, idle_timeout, server_name, identity_header, issuer_header, scopes_header, forward_authorization, websocket, underscore_headers)',
  ],
  "route-token-from.yaml": [
    "4:5 routes[0].origins: must list the sites that may use this route: a browser sends its cookie with every site's requests",
    "6:48 routes[0].token_from[2]: lists header twice",
    "9:17 routes[1].token_from: lists subprotocol, which only a WebSocket handshake carries: set websocket: true",
    "13:17 routes[2].token_from: has no use on an auth: none route, which reads no token",
    "16:28 routes[3].token_from[0].cookie: must be a cookie name (RFC 6265: letters, digits, !#$%&'*+-.^_`|~)",
    "16:42 routes[3].token_from[1]: must be header, query, subprotocol or {cookie: NAME}",
    "17:15 routes[3].origins[0]: must be an origin as a browser sends it, scheme://host[:port]; write https://app.example.com",
    "17:41 routes[3].origins[1]: must be an origin as a browser sends it, scheme://host[:port]",
    "20:14 routes[4].origins: applies to WebSocket routes and routes reading a cookie; this route is neither",
  ],
  "websocket-max-connections.yaml": ["4:22 upstream.websocket.max_connections: must be at least 1"],
  "window-too-long.yaml": ["5:39 plans.yearly.rate_limit.window: must be at most 366d"],
  "unknown-key-unicode.yaml": [
    "1:43 upstream.délai😀: unknown key (allowed here: url, timeout, max_sockets, idle_timeout, server_name, identity_header, issuer_header, scopes_header, forward_authorization, websocket, underscore_headers)",
    '1:57 upstream.timout: unknown key; did you mean "timeout"? (allowed here: url, timeout, max_sockets, idle_timeout, server_name, identity_header, issuer_header, scopes_header, forward_authorization, websocket, underscore_headers)',
  ],
  "wrong-type.yaml": ["3:16 upstream.max_sockets: must be a whole number"],
  "yaml-syntax.yaml": [
    "4:1 YAML: Flow sequence in block collection must be sufficiently indented and end with a ]",
  ],
  // The plan's name without its colon swallows the lines below it: only the YAML errors are said,
  // not the unknown plan and the odd keys the parser's guess makes of the rest.
  "yaml-plan-no-colon.yaml": [
    "8:3 YAML: Implicit keys need to be on a single line",
    "15:5 YAML: Flow sequence in block collection must be sufficiently indented and end with a ]",
    "15:5 YAML: Implicit map keys need to be followed by map values",
  ],
  "yaml11-boolean.yaml": ["4:12 limits.dry_run: must be true or false"],
  "zero-duration.yaml": [
    "4:8 tokens.ttl: must be a duration greater than zero, such as 500ms, 30s, 1m, 1h or 1d",
  ],
};

t.test("every fixture has an expectation and every expectation a fixture", async (t) => {
  const files = (await readdir(DIR)).filter((name) => name.endsWith(".yaml")).sort();
  t.strictSame(files, Object.keys(expected).sort());
});

// The variables the fixtures name are set, so that each shows its own problem; every-kind.yaml
// names one that is not.
const env = { A: "a", B: "b", APP_SECRET: "s", A_SECRET: "a", B_SECRET: "b" };
checkConfigFixtures(t, DIR, expected, env);

t.test("the prototype of plain objects is never polluted by a __proto__ key", async (t) => {
  await loadSnapshot(`${DIR}/proto-key.yaml`, { env: {} }).catch(() => undefined);
  t.equal(({} as Record<string, unknown>).polluted, undefined);
});

t.test(
  "a window of 366d and a route costing exactly its smallest limit are accepted",
  async (t) => {
    const parsed = parseConfigText(
      `upstream:
  url: http://127.0.0.1:3000
clients:
  - id: app
    secret_env: APP_SECRET
    plan: yearly
plans:
  yearly:
    rate_limit: { limit: 3, window: 366d }
  anonymous:
    quota: { limit: 3, period: day }
routes:
  - path: /v1/items
    methods: [GET]
    cost: 3
  - path: /v1/status
    methods: [GET]
    auth: none
    cost: 3
`,
      "boundaries.yaml",
    );
    t.equal(parsed.file.plans.yearly?.rate_limit?.window, "366d");
    t.strictSame(
      parsed.file.routes.map((r) => r.cost),
      [3, 3],
    );
  },
);

t.test("upstream.websocket.max_connections: 512 when not set, else as set", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-websocket-cap-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "proxy.config.yaml");
  for (const [websocket, expected] of [
    ["", 512],
    ["  websocket:\n    max_connections: 1\n", 1],
  ] as const) {
    await writeFile(path, `upstream:\n  url: http://127.0.0.1:3000\n${websocket}`);
    const snapshot = await loadSnapshot(path, { env: {} });
    t.equal(snapshot.upstream.websocketMaxConnections, expected);
    t.equal(snapshot.file.upstream.websocket.max_connections, expected);
  }
});

t.test("an assertion_max_lifetime of 1d, the longest, is accepted", async (t) => {
  const parsed = parseConfigText(
    "upstream:\n  url: http://127.0.0.1:3000\ntokens:\n  assertion_max_lifetime: 1d\n",
    "longest.yaml",
  );
  t.equal(parsed.file.tokens.assertion_max_lifetime, "1d");
});

// Only the limits in force count a route: an `auth: none` route is counted by the anonymous plan,
// a bearer route by each client's plan with the client's own limits in place of the plan's.
const servable: Record<string, string> = {
  "an anonymous quota of 1 beside a bearer route costing 2": `plans:
  anonymous:
    quota: { limit: 1, period: day }
routes:
  - path: /v1/status
    methods: [GET]
    auth: none
  - path: /v1/items
    methods: [PUT]
    cost: 2
`,
  "a plan no client holds, with a small limit": `clients:
  - id: app
    secret_env: APP_SECRET
    plan: large
plans:
  trial:
    rate_limit: { limit: 1, window: 1s }
  large:
    rate_limit: { limit: 50, window: 1s }
routes:
  - path: /v1/items
    methods: [PUT]
    cost: 2
`,
  "a client on a small plan whose own rate limits replace the plan's": `clients:
  - id: app
    secret_env: APP_SECRET
    plan: small
    rate_limit: { limit: 10, window: 1s }
plans:
  small:
    rate_limits:
      burst: { limit: 1, window: 1s }
      sustained: { limit: 5, window: 1m }
    quota: { limit: 1000, period: day }
routes:
  - path: /v1/items
    methods: [PUT]
    cost: 2
`,
};
for (const [name, body] of Object.entries(servable)) {
  t.test(`accepted: ${name}`, async (t) => {
    const parsed = parseConfigText(`upstream:\n  url: http://127.0.0.1:3000\n${body}`, "ok.yaml");
    t.equal(parsed.file.routes.at(-1)?.cost, 2);
  });
}

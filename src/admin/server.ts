/**
 * The admin listener (`admin_listen`): a small table of routes, each a method, a path and a
 * handler. It serves operators and Prometheus, never the public: every answer is JSON but
 * /metrics, and nothing it shows carries a secret.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { http } from "../http/node-http.js";
import type { Logger } from "pino";
import type { Snapshot } from "../config/snapshot.js";
import { errorReply } from "../core/context.js";
import type { Services } from "../core/services.js";
import type { Metrics } from "../metrics.js";
import { adminRefusal, isAdminHost, isLoopback, type AdminKind } from "./access.js";
import { fieldLines } from "../http/field-lines.js";
import { publicConfig } from "./config-view.js";
import { limitsAdmin, type AdminAnswer, type LimitsAdminDeps } from "./limits.js";
import { packageVersion } from "./version.js";
import { healthAnswer } from "../stages/health.js";

/** One admin route. */
export interface AdminRoute {
  readonly method: "GET" | "DELETE";
  /** Who may call it: see access.ts. */
  readonly kind: AdminKind;
  /** An exact path, or a prefix ending in `/*` whose remainder is handed to the handler. */
  readonly path: string;
  handle(req: IncomingMessage, res: ServerResponse, rest: string): void | Promise<void>;
}

/** What the admin routes read. */
export interface AdminContext {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The snapshot in force. */
  readonly config: () => Snapshot;
  /** The counters behind the config in force, for `/limits/...`. */
  readonly limits: LimitsAdminDeps;
}

/**
 * Who may ask: the admin token and the `admin_hosts` of the config in force, and the host the
 * listener is bound to.
 */
export interface AdminAccess {
  readonly token: () => string | undefined;
  readonly hosts: () => readonly string[];
  readonly host: string;
}

/** Writes `body` as a JSON answer. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

/** Writes an answer: its headers, and its body as JSON when it has one. */
function sendAnswer(res: ServerResponse, answer: AdminAnswer): void {
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name, value);
  if (answer.body === undefined) res.writeHead(answer.status).end();
  else sendJson(res, answer.status, answer.body);
}

/** The routes every admin listener serves. */
export function adminRoutes({ log, metrics, config, limits }: AdminContext): AdminRoute[] {
  const counters = (method: "GET" | "DELETE"): AdminRoute => ({
    method,
    kind: "operator",
    path: "/limits/*",
    async handle(req, res, rest) {
      let answer;
      try {
        answer = await limitsAdmin(method, `/limits/${rest}`, limits, (reset) =>
          log.info({ ...reset, caller: req.socket.remoteAddress }, "admin reset limits"),
        );
      } catch (error) {
        log.warn({ err: error }, "admin limits request failed");
        answer = errorReply(
          503,
          "limits_unavailable",
          "the limits store cannot be reached; try again shortly",
        );
      }
      sendAnswer(
        res,
        answer ??
          errorReply(404, "not_found", "use /limits/clients/{id} or /limits/addresses/{address}"),
      );
    },
  });
  return [
    {
      method: "GET",
      kind: "observability",
      path: "/metrics",
      async handle(_req, res) {
        const text = await metrics.registry.metrics();
        res.writeHead(200, { "content-type": metrics.registry.contentType });
        res.end(text);
      },
    },
    {
      method: "GET",
      kind: "operator",
      path: "/config",
      handle: (_req, res) => sendJson(res, 200, publicConfig(config())),
    },
    {
      method: "GET",
      kind: "observability",
      path: "/version",
      handle: (_req, res) => sendJson(res, 200, { version: packageVersion() }),
    },
    counters("GET"),
    counters("DELETE"),
  ];
}

function matches(route: AdminRoute, path: string): string | undefined {
  if (!route.path.endsWith("/*")) return route.path === path ? "" : undefined;
  const prefix = route.path.slice(0, -1);
  return path.startsWith(prefix) && path.length > prefix.length
    ? path.slice(prefix.length)
    : undefined;
}

/**
 * The answer to a request whose `Host` does not name the admin listener, or undefined. RFC 9112
 * §3.2: HTTP/1.1 without Host, or two Host lines, is 400. An HTTP/1.0 request without Host names
 * no host this listener answers for, so it is misdirected (421, RFC 9110 §15.5.20) like a foreign
 * name: only an IP literal, localhost or a name in `admin_hosts` is answered.
 */
function misdirection(req: IncomingMessage, names: readonly string[]): AdminAnswer | undefined {
  const host = req.headers.host;
  if (
    (host === undefined && req.httpVersionMinor !== 0) ||
    fieldLines(req.rawHeaders, "host") > 1
  ) {
    return errorReply(400, "invalid_request", "HTTP/1.1 needs exactly one Host field");
  }
  if (isAdminHost(host, names)) return undefined;
  return errorReply(
    421,
    "misdirected_request",
    "the admin API answers only a Host that is an IP address, localhost or a name in admin_hosts",
  );
}

/**
 * The admin listener's server (not yet listening), answering from `routes`. `probe` answers the
 * health paths first, for any method and without the admin token: the kubelet sends none.
 */
export function createAdminServer(
  routes: readonly AdminRoute[],
  log: Logger,
  access: AdminAccess,
  probe: (path: string, method: string | undefined) => AdminAnswer | undefined,
): Server {
  // Node's own Host check is off so that its 400 has a JSON body like every other answer.
  return http.createServer({ requireHostHeader: false }, (req, res) => {
    const misdirected = misdirection(req, access.hosts());
    if (misdirected !== undefined) {
      sendAnswer(res, misdirected);
      return;
    }
    const target = req.url ?? "/";
    const query = target.indexOf("?");
    const path = query === -1 ? target : target.slice(0, query);
    const probed = probe(path, req.method);
    if (probed !== undefined) {
      sendAnswer(res, probed);
      return;
    }
    // HEAD is answered as GET is; Node leaves the body out.
    const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET");
    const found = routes.flatMap((route) => {
      const rest = matches(route, path);
      return rest === undefined ? [] : [{ route, rest }];
    });
    if (found.length === 0) {
      const paths = routes.map((route) => `${route.method} ${route.path}`).join(", ");
      sendAnswer(res, errorReply(404, "not_found", `the admin listener serves ${paths}`));
      return;
    }
    const chosen = found.find(({ route }) => route.method === method);
    if (chosen === undefined) {
      const allow = [...new Set(found.map(({ route }) => route.method))].join(", ");
      res.setHeader("allow", allow);
      sendAnswer(res, errorReply(405, "method_not_allowed", `${path} answers ${allow}`));
      return;
    }
    const refusal = adminRefusal(
      chosen.route.kind,
      req.headers.authorization,
      access.token(),
      access.host,
    );
    if (refusal !== undefined) {
      sendAnswer(res, refusal);
      return;
    }
    Promise.resolve()
      .then(() => chosen.route.handle(req, res, chosen.rest))
      .catch((error: unknown) => {
        log.error({ err: error, path }, "admin request failed");
        if (!res.headersSent) {
          sendAnswer(res, errorReply(500, "internal_error", "see gatehouse's log"));
        } else {
          res.destroy();
        }
      });
  });
}

/**
 * The admin listener's server (not yet listening) for a running gatehouse: `current` gives the
 * runtime in force (its snapshot and limiter store), `host` is where the listener is bound. It
 * also answers the health paths as the public listener does, so a public listener whose every
 * connection is taken still answers the probes here.
 */
export function createAdmin(
  { log, metrics, now, lifecycle }: Pick<Services, "log" | "metrics" | "now" | "lifecycle">,
  current: LimitsAdminDeps["current"],
  host: string,
): Server {
  if (!isLoopback(host) && current().config.adminToken === undefined) {
    log.warn(
      { adminListen: host },
      "admin_listen is reachable from other machines and admin_token_env is not set: /config and /limits answer 403 until it is",
    );
  }
  return createAdminServer(
    adminRoutes({ log, metrics, config: () => current().config, limits: { current, now } }),
    log,
    {
      token: () => current().config.adminToken,
      hosts: () => current().config.adminHosts,
      host,
    },
    (path, method) => healthAnswer(current().config.health, path, method, lifecycle)?.reply,
  );
}

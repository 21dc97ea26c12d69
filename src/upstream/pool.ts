/**
 * The connections to one upstream: a keep-alive agent whose idle sockets are closed in time, and
 * the http-proxy servers that send requests over it.
 */
import type { Agent } from "node:http";
import { http, https } from "../http/node-http.js";
import type { Socket } from "node:net";
import type { Stream } from "node:stream";
import { ProxyServer } from "http-proxy-3";
import { answerFirstSockets } from "./answer-first.js";
import { keepRequestFraming } from "./http-proxy-internals.js";
import { closeIdleSockets } from "./idle-sockets.js";
import type { UpstreamSettings } from "./settings.js";

// The body of a request that has none: http-proxy pipes its `buffer` option into the upstream
// request, and this one only ends it.
const NO_BODY = {
  pipe<T extends NodeJS.WritableStream>(destination: T): T {
    destination.end();
    return destination;
  },
} as unknown as Stream;

/** The http-proxy servers of one upstream. */
export interface Pool {
  /** Pipes the request's body into the upstream request. */
  readonly withBody: ProxyServer;
  /** For a request without a body: ends the upstream request at once. */
  readonly bodiless: ProxyServer;
  /** For a retry, without a body: on a connection of its own, outside the pool. */
  readonly fresh: ProxyServer;
  /** The three servers, for their listeners. */
  readonly servers: readonly ProxyServer[];
  /** Stops reusing sockets: idle ones close now, busy ones when their exchange ends. */
  retire(): void;
}

/** Creates the agent and the servers of `upstream`. */
export function createPool(upstream: UpstreamSettings): Pool {
  const { url } = upstream;
  const agentOptions = {
    keepAlive: true,
    maxSockets: upstream.maxSockets,
    scheduling: "lifo" as const,
  };
  const agent: Agent =
    url.protocol === "https:" ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  answerFirstSockets(agent);
  const stopSweep = closeIdleSockets(agent, upstream.idleTimeoutMs);
  const options = {
    // A URL rather than its text: http-proxy parses a string target on every request.
    target: url,
    agent,
    // The path and query are forwarded exactly as canonicalised, never re-parsed; the base path
    // is joined by the forwarder, so http-proxy need not parse the target's path on every request
    // either.
    toProxy: true,
    prependPath: false,
    xfwd: false,
    selfHandleResponse: true,
  };
  // Two servers on one pool: a request without a body (neither Content-Length nor
  // Transfer-Encoding, RFC 9112 §6.3) ends its upstream request at once instead of being piped
  // into it. Per-request options would do the same, but they give http-proxy's options object a
  // second shape on every request; measured, that cost more than the pipe it saves.
  const withBody = new ProxyServer(options);
  const bodiless = new ProxyServer({ ...options, buffer: NO_BODY });
  // A retry goes out on a connection of its own, never on another pooled one that may be as
  // stale as the one that failed.
  const fresh = new ProxyServer({ ...options, agent: false, buffer: NO_BODY });
  const servers = [withBody, bodiless, fresh];
  for (const server of servers) keepRequestFraming(server);
  return {
    withBody,
    bodiless,
    fresh,
    servers,
    retire() {
      stopSweep();
      agent.on("free", (socket: Socket) => socket.destroy());
      for (const sockets of Object.values(agent.freeSockets) as Array<Socket[] | undefined>) {
        for (const socket of sockets ?? []) socket.destroy();
      }
    },
  };
}

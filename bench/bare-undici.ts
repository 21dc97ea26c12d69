/**
 * A peer of the reference forwarder, run in its own process: a plain Node HTTP server forwarding
 * through an undici Pool with keep-alive connections, streaming both ways, nothing else. It shows
 * the floor a forwarder on undici's dispatcher can reach on the same machine.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool, type Dispatcher } from "undici";

const target = process.argv[2];
if (target === undefined) throw new Error("usage: bare-undici.js UPSTREAM_URL");

// The same pool size as gatehouse's default `upstream.max_sockets`.
const pool = new Pool(target, { connections: 256 });

// undici refuses to send these itself: they describe one connection, not the request.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "expect"]);

function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const copy: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) copy[name] = value;
  }
  return copy;
}

function relay(res: ServerResponse): Dispatcher.DispatchHandler {
  return {
    // Marks the handler as one of undici 7's own kind (controller first).
    onRequestStart() {},
    onResponseStart(_controller, statusCode, headers) {
      delete headers["transfer-encoding"];
      delete headers.connection;
      delete headers["keep-alive"];
      res.writeHead(statusCode, headers);
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) {
        controller.pause();
        res.once("drain", () => controller.resume());
      }
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError(_controller, _error) {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    },
  };
}

const server = createServer((req, res) => {
  const bodiless =
    req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined;
  pool.dispatch(
    {
      path: req.url ?? "/",
      method: req.method as Dispatcher.HttpMethod,
      headers: forwardedHeaders(req.headers),
      body: bodiless ? null : req,
    },
    relay(res),
  );
});
// Ends with the benchmark, even when the benchmark itself was killed.
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
server.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});

/**
 * The reference forwarder, run in its own process: http-proxy-3 with a keep-alive agent and an
 * error listener, nothing else. gatehouse's cost per request is compared with this one's.
 */
import { Agent, createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ProxyServer } from "http-proxy-3";

const target = process.argv[2];
if (target === undefined) throw new Error("usage: bare.js UPSTREAM_URL");

// The same pool size as gatehouse's default `upstream.max_sockets`.
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const proxy = new ProxyServer({ target, agent });
proxy.on("error", (_error: Error, _req: unknown, res: unknown) => {
  const response = res as ServerResponse;
  if (response.headersSent) response.destroy();
  else response.writeHead(502).end();
});

const server = createServer((req, res) => proxy.web(req, res));
// Ends with the benchmark, even when the benchmark itself was killed.
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
server.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});

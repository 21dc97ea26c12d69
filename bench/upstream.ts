/**
 * The benchmark's upstream, run in its own process: answers every request at once with a small
 * JSON body, so the figures measure the proxy in front of it rather than the service.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const BODY = Buffer.from('{"ok":true,"items":[{"id":1,"name":"one"},{"id":2,"name":"two"}]}');
const HEADERS = { "content-type": "application/json", "content-length": String(BODY.length) };

const server = createServer((req, res) => {
  req.resume();
  res.writeHead(200, HEADERS);
  res.end(BODY);
});
// The proxies' keep-alive pools sit idle while the other target is measured; a short server
// timeout would close their sockets and make the next run pay for reconnecting (or race a reset).
server.keepAliveTimeout = 600_000;

// Ends with the benchmark, even when the benchmark itself was killed.
process.on("disconnect", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
server.listen(0, "127.0.0.1", () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});

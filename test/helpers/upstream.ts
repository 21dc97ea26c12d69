/** A real upstream on port 0 that records exactly what it received. */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the upstream saw it. */
export interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

/** Decides the upstream's answer; the default echoes a small JSON summary. */
export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** A running recording upstream. */
export interface Upstream {
  readonly url: string;
  readonly port: number;
  readonly received: Received[];
  handler: UpstreamHandler;
  close(): Promise<void>;
}

const echo: UpstreamHandler = (req, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ ok: true, method: req.method, url: req.url }));
};

/** Starts an upstream on 127.0.0.1:0. */
export async function startUpstream(handler: UpstreamHandler = echo): Promise<Upstream> {
  const received: Received[] = [];
  const upstream: Upstream = {
    url: "",
    port: 0,
    received,
    handler,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      received.push({
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
      });
      upstream.handler(req, res, body);
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return Object.assign(upstream, { url: `http://127.0.0.1:${port}`, port });
}

/**
 * An upstream that answers each request `delayMs` later, counting the requests it holds at once
 * (`seen.most`), so a test can tell whether gatehouse ever forwarded two of a connection together.
 */
export async function startSlowUpstream(
  delayMs: number,
): Promise<{ upstream: Upstream; seen: { inFlight: number; most: number } }> {
  const seen = { inFlight: 0, most: 0 };
  const upstream = await startUpstream((req, res) => {
    seen.inFlight++;
    seen.most = Math.max(seen.most, seen.inFlight);
    setTimeout(() => {
      seen.inFlight--;
      const body = JSON.stringify({ url: req.url });
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    }, delayMs);
  });
  return { upstream, seen };
}

/** A WebSocket upstream and client of the `ws` package, for tests through real sockets. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocket, WebSocketServer, type RawData } from "ws";
import { eventually } from "./client.js";

/** A `ws` server behind a node:http server on port 0, recording what it saw. */
export interface WsUpstream {
  readonly url: string;
  readonly server: Server;
  readonly wss: WebSocketServer;
  /** Every handshake's request, and every plain request's. */
  readonly handshakes: IncomingMessage[];
  readonly plain: IncomingMessage[];
  /** Close codes the upstream received. */
  readonly closes: number[];
  close(): Promise<void>;
}

/**
 * An echoing WebSocket upstream (`options` go to WebSocketServer); `answer` answers the plain
 * requests, by default with `plain` and the request's `Upgrade`.
 */
export async function startWsUpstream(
  options: ConstructorParameters<typeof WebSocketServer>[0] = {},
  answer: (req: IncomingMessage, res: ServerResponse) => void = (req, res) =>
    res.end(`plain ${req.headers.upgrade ?? "-"}`),
): Promise<WsUpstream> {
  const handshakes: IncomingMessage[] = [];
  const plain: IncomingMessage[] = [];
  const closes: number[] = [];
  const server = createServer((req, res) => {
    plain.push(req);
    answer(req, res);
  });
  const wss = new WebSocketServer({ ...options, server });
  wss.on("connection", (ws, req) => {
    handshakes.push(req);
    ws.on("message", (data: RawData, binary: boolean) => ws.send(data, { binary }));
    ws.on("close", (code) => closes.push(code));
    // A frame `ws` cannot read closes the connection with 1002, recorded among the closes.
    ws.on("error", () => undefined);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    wss,
    handshakes,
    plain,
    closes,
    close: () =>
      new Promise((done) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** What opening a WebSocket came to: the socket, or the HTTP answer that refused it. */
export type Opened =
  | { readonly ws: WebSocket; readonly headers: IncomingMessage["headers"] }
  | {
      readonly status: number;
      readonly body: string;
      readonly headers: IncomingMessage["headers"];
    };

/** Opens a WebSocket to `url` with `headers` and `protocols`. */
export function openWs(
  url: string,
  headers: Record<string, string> = {},
  protocols: string[] = [],
  options: ConstructorParameters<typeof WebSocket>[2] = {},
): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { ...options, headers });
    let upgradeHeaders: IncomingMessage["headers"] = {};
    ws.on("upgrade", (res) => (upgradeHeaders = res.headers));
    ws.on("open", () => resolve({ ws, headers: upgradeHeaders }));
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    ws.on("error", reject);
  });
}

/** The next message `ws` receives. */
export function nextMessage(ws: WebSocket): Promise<{ data: Buffer; binary: boolean }> {
  return new Promise((resolve) =>
    ws.once("message", (data: RawData, binary: boolean) =>
      resolve({ data: Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer), binary }),
    ),
  );
}

/** The code and reason `ws` closes with. */
export function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString("utf8") })),
  );
}

/**
 * Opens a WebSocket to `url`, trying again while it is refused or its connection is closed
 * unanswered, until one opens or the wide deadline of `eventually` passes.
 */
export async function untilOpen(url: string): Promise<WebSocket> {
  let ws: WebSocket | undefined;
  await eventually(async () => {
    try {
      const opened = await openWs(url);
      if ("ws" in opened) ws = opened.ws;
    } catch {
      // Closed before an answer: tried again.
    }
    return ws !== undefined;
  });
  if (ws === undefined) throw new Error(`no WebSocket opened at ${url}`);
  return ws;
}

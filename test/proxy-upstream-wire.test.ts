/**
 * What the upstream writes on the wire, through real sockets: informational responses, framing
 * fields on bodiless statuses, an answer that comes while the client is still uploading, and
 * pooled connections the upstream has already closed.
 */
import { ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import t from "tap";
import { eventually, json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { parseResponse, rawRequest } from "./helpers/raw.js";
import { startRawUpstream, type RawExchange, type RawUpstream } from "./helpers/raw-upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS]
    auth: none
`;

const OK = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";

/** The raw answers the upstream gives, by request path. */
const ANSWERS: Record<string, string> = {
  "/v1/early-hints": `HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\n\r\n${OK}`,
  "/v1/processing": `HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n${OK}`,
  "/v1/continue": `HTTP/1.1 100 Continue\r\n\r\n${OK}`,
  "/v1/hints-with-length": `HTTP/1.1 103 Early Hints\r\nLink: </a.js>\r\nContent-Length: 0\r\n\r\n${OK}`,
  "/v1/hints-with-chunked": `HTTP/1.1 103 Early Hints\r\nLink: </a.js>\r\nTransfer-Encoding: chunked\r\n\r\n${OK}`,
  "/v1/no-content": "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-Kept: yes\r\n\r\n",
  "/v1/not-modified": 'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: 1234\r\n\r\n',
  "/v1/head": "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
};

/** The client's side of the wire: everything gatehouse wrote until it closed. */
function exchange(port: number, request: string): Promise<string> {
  return rawRequest(port, request).then((response) => response.text);
}

function get(path: string, version = "1.1", extra = ""): string {
  return `GET ${path} HTTP/${version}\r\nHost: gatehouse.test\r\n${extra}Connection: close\r\n\r\n`;
}

/** The status lines of every response in `text`, in order. */
function statusLines(text: string): string[] {
  return text.split("\r\n").filter((line) => line.startsWith("HTTP/1.1 "));
}

/** Heads of every response in `text`: the informational ones, then the final one. */
function heads(text: string): string[] {
  return text
    .split("\r\n\r\n")
    .filter((part) => part.startsWith("HTTP/1.1 "))
    .map((part) => part.toLowerCase());
}

t.test("Node still has the private writer that relays a 1xx (it breaks here on upgrade)", (t) => {
  const writer = (ServerResponse.prototype as unknown as Record<string, unknown>)._writeRaw;
  t.type(writer, "function");
  t.end();
});

t.test("the upstream's wire", async (t) => {
  const upstream = await startRawUpstream((ex) => {
    if (ex.path === "/v1/unasked-upgrade") {
      // A switch nobody asked for, after which the upstream speaks no more HTTP.
      ex.socket.write(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
      );
      return;
    }
    ex.socket.write(ANSWERS[ex.path] ?? OK);
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });

  t.test("103 Early Hints reach an HTTP/1.1 client before the final response", async (t) => {
    const text = await exchange(gh.port, get("/v1/early-hints"));
    t.same(statusLines(text), ["HTTP/1.1 103 Early Hints", "HTTP/1.1 200 OK"]);
    const [hints = ""] = heads(text);
    t.match(hints, /\r\nlink: <\/app\.css>; rel=preload(\r\n|$)/);
    t.equal(parseResponse(text.slice(text.indexOf("HTTP/1.1 200"))).body, "ok");
  });

  t.test("every 1xx the upstream sends is relayed, each in its order", async (t) => {
    const text = await exchange(gh.port, get("/v1/processing"));
    t.same(statusLines(text), [
      "HTTP/1.1 102 Processing",
      "HTTP/1.1 102 Processing",
      "HTTP/1.1 200 OK",
    ]);
  });

  t.test("an HTTP/1.0 client gets no 1xx, only the final response", async (t) => {
    for (const path of ["/v1/early-hints", "/v1/processing"]) {
      const text = await exchange(gh.port, get(path, "1.0"));
      t.same(statusLines(text), ["HTTP/1.1 200 OK"], path);
    }
  });

  t.test("an upstream's unasked 100 Continue is a 502, logged and counted", async (t) => {
    // undici's rule: gatehouse never sends Expect upstream, so a 100 answers nothing it asked.
    const before = sampleValue(await scrape(gh), "gatehouse_upstream_failures_total", {
      reason: "bad_response",
    });
    for (const version of ["1.1", "1.0"]) {
      const response = parseResponse(await exchange(gh.port, get("/v1/continue", version)));
      t.equal(response.status, 502, `HTTP/${version}`);
      t.match(JSON.parse(response.body), { error: "bad_gateway" });
    }
    const after = sampleValue(await scrape(gh), "gatehouse_upstream_failures_total", {
      reason: "bad_response",
    });
    t.equal(after - (Number.isNaN(before) ? 0 : before), 2, "counted as bad_response");
    t.ok(
      gh.logs.some((l) => l.msg === "upstream failed" && l.reason === "bad_response"),
      "the log line names the reason",
    );
  });

  t.test("a client that sent Expect gets one 100 Continue, from gatehouse", async (t) => {
    const request =
      "POST /v1/expected HTTP/1.1\r\nHost: gatehouse.test\r\nExpect: 100-continue\r\n" +
      "Content-Length: 2\r\nConnection: close\r\n\r\nhi";
    const text = await exchange(gh.port, request);
    t.same(statusLines(text), ["HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"]);
  });

  t.test("a 1xx is relayed without Content-Length or Transfer-Encoding", async (t) => {
    for (const path of ["/v1/hints-with-length", "/v1/hints-with-chunked"]) {
      const text = await exchange(gh.port, get(path));
      t.same(statusLines(text), ["HTTP/1.1 103 Early Hints", "HTTP/1.1 200 OK"], path);
      const [hints = ""] = heads(text);
      t.match(hints, /link: <\/a\.js>/);
      t.notMatch(hints, /content-length|transfer-encoding/);
    }
  });

  t.test("a 204 reaches the client without Content-Length or Transfer-Encoding", async (t) => {
    const text = await exchange(gh.port, get("/v1/no-content"));
    const response = parseResponse(text);
    t.equal(response.status, 204);
    t.equal(response.headers["x-kept"], "yes", "the upstream's other fields pass");
    t.equal(response.headers["content-length"], undefined);
    t.equal(response.headers["transfer-encoding"], undefined);
    t.equal(response.body, "");
  });

  t.test("a 304 keeps the Content-Length of the representation, with no body", async (t) => {
    const response = parseResponse(await exchange(gh.port, get("/v1/not-modified")));
    t.equal(response.status, 304);
    t.equal(response.headers["content-length"], "1234", "RFC 9110 §8.6 lets a 304 announce it");
    t.equal(response.headers["transfer-encoding"], undefined);
    t.equal(response.body, "");
  });

  t.test("a HEAD response keeps the Content-Length of the GET, with no body", async (t) => {
    const request = "HEAD /v1/head HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n";
    const response = parseResponse(await exchange(gh.port, request));
    t.equal(response.status, 200);
    t.equal(response.headers["content-length"], "1234");
    t.equal(response.headers["transfer-encoding"], undefined);
    t.equal(response.body, "");
  });

  t.test("a 101 the client did not ask for is a 502 bad_gateway", async (t) => {
    const res = await send(`${gh.url}/v1/unasked-upgrade`);
    t.equal(res.status, 502);
    t.match(json(res), { error: "bad_gateway", message: String });
    const after = await send(`${gh.url}/v1/fine`);
    t.equal(after.status, 200, "the next request is served");
  });
});

/** Writes `head` and the first part of a body, and resolves with everything read until close. */
function uploadUntilAnswered(
  port: number,
  head: string,
  firstPart: string,
): Promise<{ text: string; socket: Socket }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // Writing on after gatehouse closed may reset the connection; what was read still counts.
    socket.on("error", () => {});
    socket.on("close", () => resolve({ text: Buffer.concat(chunks).toString("latin1"), socket }));
    socket.write(head + firstPart);
  });
}

t.test("an early answer while the client is still uploading reaches the client", async (t) => {
  const upstream = await startRawUpstream((ex) => {
    // The upstream reads no body: it answers at once and closes, as a server refusing the
    // upload does.
    ex.socket.end(
      "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n" +
        'Content-Length: 17\r\nConnection: close\r\n\r\n{"error":"large"}',
    );
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const framings = {
    "Content-Length": "Content-Length: 1000000\r\n",
    chunked: "Transfer-Encoding: chunked\r\n",
  };
  for (const [name, framing] of Object.entries(framings)) {
    const head = `POST /v1/upload HTTP/1.1\r\nHost: gatehouse.test\r\n${framing}\r\n`;
    const part = name === "chunked" ? "1000\r\n" + "x".repeat(0x1000) + "\r\n" : "x".repeat(4096);
    const { text } = await uploadUntilAnswered(gh.port, head, part);
    const response = parseResponse(text);
    t.equal(response.status, 413, `${name}: the upstream's status`);
    t.equal(response.body, '{"error":"large"}', `${name}: and its whole body`);
    t.equal(response.headers.connection, "close", `${name}: the rest of the upload is not read`);
  }
  t.equal((await send(`${gh.url}/v1/fine`)).status, 413, "gatehouse serves on");
});

/** An upstream that closes each connection when its second request arrives, without answering. */
async function closingOnReuse(): Promise<RawUpstream> {
  return startRawUpstream((ex: RawExchange) => {
    if (ex.index > 0) ex.socket.destroy();
    else ex.socket.write(ex.method === "HEAD" ? OK.slice(0, -2) : OK);
  });
}

t.test("a pooled connection the upstream already closed", async (t) => {
  const upstream = await closingOnReuse();
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const first = async (): Promise<void> => {
    const res = await send(`${gh.url}/v1/first`);
    t.equal(res.status, 200, "the first request opens the pooled connection");
  };

  t.test("an idempotent request is retried once on a new connection", async (t) => {
    for (const method of ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]) {
      await first();
      const before = upstream.received.length;
      const res = await send(`${gh.url}/v1/again`, { method });
      t.equal(res.status, 200, method);
      const seen = upstream.received.slice(before);
      t.same(
        seen.map((ex) => [ex.method, ex.index]),
        [
          [method, 1],
          [method, 0],
        ],
        `${method}: the stale connection, then a new one`,
      );
    }
  });

  t.test("a PUT with an empty body is retried too", async (t) => {
    await first();
    const before = upstream.received.length;
    const res = await send(`${gh.url}/v1/again`, { method: "PUT", body: "" });
    t.equal(res.status, 200);
    t.equal(upstream.received.length - before, 2);
  });

  t.test("POST and PATCH are never retried: 502, and the upstream saw one", async (t) => {
    for (const method of ["POST", "PATCH"]) {
      await first();
      const before = upstream.received.length;
      const res = await send(`${gh.url}/v1/again`, { method, body: "payload" });
      t.equal(res.status, 502, method);
      t.match(json(res), { error: "bad_gateway" });
      t.equal(upstream.received.length - before, 1, `${method}: sent once`);
    }
  });

  t.test("a PUT whose body was streamed is not retried", async (t) => {
    await first();
    const before = upstream.received.length;
    const res = await send(`${gh.url}/v1/again`, { method: "PUT", body: "payload" });
    t.equal(res.status, 502);
    t.equal(upstream.received.length - before, 1);
  });
});

t.test("a retry that fails again is a 502, and there is only one retry", async (t) => {
  let connections = 0;
  const upstream = await startRawUpstream((ex) => {
    // Every connection after the first dies on its first request: the retry's new connection too.
    if (ex.connection === 0 && ex.index === 0) ex.socket.write(OK);
    else ex.socket.destroy();
    connections = Math.max(connections, ex.connection + 1);
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  t.equal((await send(`${gh.url}/v1/first`)).status, 200);
  const res = await send(`${gh.url}/v1/again`);
  t.equal(res.status, 502);
  t.equal(upstream.received.length, 3, "the first request, the stale one and one retry");
  t.equal(connections, 2);
});

t.test("an idle pooled connection is closed after upstream.idle_timeout", async (t) => {
  const upstream = await startRawUpstream((ex) => ex.socket.write(OK));
  const gh: TestGatehouse = await startTestGatehouse(
    configFor(upstream.url, ROUTES).replace("timeout: 2s", "timeout: 2s\n  idle_timeout: 200ms"),
  );
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  t.equal((await send(`${gh.url}/v1/first`)).status, 200);
  const [first] = upstream.received;
  let closed = false;
  first?.socket.on("end", () => (closed = true));
  t.ok(await eventually(async () => closed), "gatehouse ended the idle connection");
  t.equal(upstream.received.length, 1, "without sending anything more");
  t.equal((await send(`${gh.url}/v1/second`)).status, 200, "a new connection serves the next");
  t.equal(upstream.received.at(-1)?.connection, 1);
});

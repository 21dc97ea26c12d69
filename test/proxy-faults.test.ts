/**
 * Upstream faults through real sockets (docs/forwarding.md, docs/errors.md): refused, silent,
 * reset before or during the response, garbage. gatehouse answers 502/504 or cuts the client off,
 * and keeps serving.
 */
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { request as httpRequest } from "node:http";
import { Readable } from "node:stream";
import t from "tap";
import { eventually, json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";
import { refusingPort } from "./helpers/ports.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET, POST]
    auth: none
`;

/** How a response ended for the client: completely, or cut short. */
interface Outcome {
  readonly status: number;
  readonly bytes: number;
  readonly complete: boolean;
  readonly error: string | undefined;
}

function fetchOutcome(url: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false });
    req.on("error", reject);
    req.on("response", (res) => {
      let bytes = 0;
      let error: string | undefined;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("error", (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
      res.on("close", () =>
        resolve({ status: res.statusCode ?? 0, bytes, complete: res.complete, error }),
      );
    });
    req.end();
  });
}

/** The status of /healthz: 200 while the process runs. */
async function liveness(gh: TestGatehouse): Promise<number> {
  return (await send(`${gh.url}/healthz`)).status;
}

t.test("502 bad_gateway when the upstream port is closed", async (t) => {
  const gh = await startTestGatehouse(
    configFor(`http://127.0.0.1:${await refusingPort()}`, ROUTES),
  );
  t.teardown(() => gh.close());
  for (let i = 0; i < 3; i++) {
    const res = await send(`${gh.url}/v1/items`);
    t.equal(res.status, 502);
    t.match(res.headers["content-type"], /^application\/json/);
    t.match(json(res), { error: "bad_gateway", message: String });
    t.type(res.headers["x-request-id"], "string");
  }
  const post = await send(`${gh.url}/v1/items`, { method: "POST", body: "x".repeat(100_000) });
  t.equal(post.status, 502, "also with a request body");
  t.equal(await liveness(gh), 200, "the process is alive");
});

t.test("faults of a live upstream", async (t) => {
  const upstream = await startUpstream();
  const gh = await startTestGatehouse(
    configFor(upstream.url, ROUTES).replace("timeout: 2s", "timeout: 300ms"),
  );
  // For the cases that must not time out: a wider timeout, and gaps of a quarter of it at most
  // beyond it, so a loaded machine does not turn them into 504s.
  const patient = await startTestGatehouse(
    configFor(upstream.url, ROUTES).replace("timeout: 2s", "timeout: 1s"),
  );
  const held: Array<{ closed: boolean }> = [];
  upstream.handler = (req, res) => {
    const path = req.url ?? "";
    if (path === "/v1/silent") {
      // Never answers; records whether gatehouse gave up on the exchange.
      const exchange = { closed: false };
      held.push(exchange);
      res.on("close", () => (exchange.closed = true));
    } else if (path === "/v1/reset-before-headers") {
      req.socket.destroy();
    } else if (path === "/v1/reset-mid-chunked") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write(Buffer.alloc(64 * 1024, 1), () => res.socket?.destroy());
    } else if (path === "/v1/reset-mid-length") {
      res.writeHead(200, { "content-length": String(256 * 1024) });
      res.write(Buffer.alloc(64 * 1024, 1), () => res.socket?.destroy());
    } else if (path === "/v1/garbage") {
      (req.socket as Socket).end("this is not HTTP\r\n\r\n");
    } else if (path === "/v1/bad-framing") {
      (req.socket as Socket).end(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      );
    } else if (path === "/v1/slow-body") {
      // Headers at once, the body in pieces that take longer than upstream.timeout in all, none
      // of them after a silence that long: not a timeout.
      res.writeHead(200, { "content-type": "text/plain" });
      let piece = 0;
      const next = (): void => {
        if (++piece === 6) {
          res.end("last");
          return;
        }
        res.write(`${piece} `);
        setTimeout(next, 250);
      };
      next();
    } else {
      res.end("fine");
    }
  };
  t.teardown(async () => {
    await gh.close();
    await patient.close();
    await upstream.close();
  });

  t.test("504 gateway_timeout when no headers arrive within upstream.timeout", async (t) => {
    const res = await send(`${gh.url}/v1/silent`);
    t.equal(res.status, 504);
    t.match(json(res), { error: "gateway_timeout", message: String });
    t.ok(
      await eventually(async () => held.at(-1)?.closed === true),
      "the upstream exchange is abandoned, not left open",
    );
    t.equal(await liveness(gh), 200, "the process is alive");
  });

  t.test("504 also for a POST whose body was sent", async (t) => {
    const res = await send(`${gh.url}/v1/silent`, { method: "POST", body: "payload" });
    t.equal(res.status, 504);
  });

  t.test("502 when the upstream resets before its headers", async (t) => {
    const res = await send(`${gh.url}/v1/reset-before-headers`);
    t.equal(res.status, 502);
    t.match(json(res), { error: "bad_gateway" });
    t.equal(await liveness(gh), 200, "the process is alive");
  });

  t.test("502 when the upstream answers garbage", async (t) => {
    const res = await send(`${gh.url}/v1/garbage`);
    t.equal(res.status, 502);
    t.match(json(res), { error: "bad_gateway" });
  });

  t.test("502 when the upstream answers with both CL and TE", async (t) => {
    const res = await send(`${gh.url}/v1/bad-framing`);
    t.equal(res.status, 502);
  });

  t.test("a reset mid-body (chunked) reaches the client as a cut, never a clean end", async (t) => {
    const outcome = await fetchOutcome(`${gh.url}/v1/reset-mid-chunked`);
    t.equal(outcome.status, 200, "the status line had already gone out");
    t.equal(outcome.complete, false, "the client sees an incomplete response");
    t.ok(outcome.bytes <= 64 * 1024);
    t.equal(await liveness(gh), 200, "the process is alive");
  });

  t.test("a reset mid-body (Content-Length) leaves the body short", async (t) => {
    const outcome = await fetchOutcome(`${gh.url}/v1/reset-mid-length`);
    t.equal(outcome.status, 200);
    t.equal(outcome.complete, false);
    t.ok(outcome.bytes < 256 * 1024, "fewer bytes than announced");
    t.equal(await liveness(gh), 200, "the process is alive");
  });

  t.test("upstream.timeout bounds each silence, not the whole body", async (t) => {
    const res = await send(`${patient.url}/v1/slow-body`);
    t.equal(res.status, 200);
    t.equal(res.body.toString(), "1 2 3 4 5 last");
  });

  t.test("regression: a slow upload is not taken for a slow upstream", async (t) => {
    // The body takes longer than upstream.timeout (1s) to arrive; the upstream answers as soon
    // as it has it.
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${patient.url}/v1/upload`, { method: "POST", agent: false });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      let sent = 0;
      const next = (): void => {
        if (sent++ === 6) {
          req.end();
          return;
        }
        req.write("x".repeat(1000));
        setTimeout(next, 250);
      };
      next();
    });
    t.equal(status, 200);
    t.equal(upstream.received.at(-1)?.body.length, 6000, "the whole body reached the upstream");
  });

  t.test("after every fault the upstream is used again normally", async (t) => {
    const res = await send(`${gh.url}/v1/ok`);
    t.equal(res.status, 200);
    t.equal(res.body.toString(), "fine");
  });

  t.test("faults are logged without crashing; the access log records each", async (t) => {
    const statuses = gh.logs.filter((l) => l.msg === "request").map((l) => l.status);
    t.ok(statuses.includes(502));
    t.ok(statuses.includes(504));
  });

  t.end();
});

t.test("504 when the upstream stops reading a request body", async (t) => {
  // Accepts connections and never reads from them: the upload backs up and stops.
  const sockets: Socket[] = [];
  const stalled = createTcpServer((socket) => {
    socket.pause();
    sockets.push(socket);
  });
  await new Promise<void>((done) => stalled.listen(0, "127.0.0.1", done));
  const { port } = stalled.address() as AddressInfo;
  const gh = await startTestGatehouse(
    configFor(`http://127.0.0.1:${port}`, ROUTES).replace("timeout: 2s", "timeout: 300ms"),
  );
  t.teardown(async () => {
    await gh.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((done) => stalled.close(() => done()));
  });
  let produced = 0;
  const body = new Readable({
    read() {
      // Far more than the socket buffers on both sides hold.
      produced += 65536;
      this.push(produced > 64 * 1024 * 1024 ? null : Buffer.alloc(65536, 0x62));
    },
  });
  const res = await send(`${gh.url}/v1/upload`, { method: "POST", body });
  t.equal(res.status, 504);
  t.match(json(res), { error: "gateway_timeout" });
  t.equal(await liveness(gh), 200, "the process is alive");
});

t.test("a client that goes away mid-request does not hurt the process", async (t) => {
  const upstream = await startUpstream();
  let closedUpstream = false;
  upstream.handler = (_req, res) => {
    res.writeHead(200);
    res.write("partial");
    res.on("close", () => (closedUpstream = true));
  };
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  await new Promise<void>((done, fail) => {
    const req = httpRequest(`${gh.url}/v1/stream`, { agent: false });
    req.on("response", (res) => {
      res.once("data", () => {
        req.destroy();
        done();
      });
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "ECONNRESET") fail(error);
    });
    req.end();
  });
  t.ok(await eventually(async () => closedUpstream), "the upstream exchange is closed too");
  t.equal(await liveness(gh), 200, "the process is alive");
});

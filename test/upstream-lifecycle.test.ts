/**
 * The life of an upstream connection, each rule shown with an upstream that misbehaves on
 * purpose through real sockets: bytes after a complete response never become another client's
 * answer, a connection goes back to the pool only when it can be read and written, interim
 * responses are bounded, silence after the head ends the exchange, and a status outside 100-599
 * is a 502.
 */
import { connect, type Socket } from "node:net";
import t from "tap";
import { eventually, json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { parseResponse } from "./helpers/raw.js";
import { startRawUpstream, type RawExchange } from "./helpers/raw-upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET, HEAD, POST]
    auth: none
`;

// One pooled connection: a poisoned or stuck one would be the next request's only way out.
const ONE_SOCKET = (url: string, more = ""): string =>
  configFor(url, ROUTES).replace("timeout: 2s", `timeout: 2s\n  max_sockets: 1${more}`);

const OWN = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nyour account";

// What an attacker wants the next client on the connection to read: a redirect of its choosing
// and a session cookie it knows. The head is left open: a client that kept the connection would
// read the next response's status line and fields as the value of its last field, and the next
// client would get the attacker's status with its own body underneath.
const INJECTED =
  "HTTP/1.1 302 Found\r\nLocation: https://evil.example/login\r\n" +
  "Set-Cookie: session=attacker-fixed\r\nX-Swallowed: ";

/** An answer whose `Content-Length` counts characters of a UTF-8 body (a common legacy bug). */
function countedInCharacters(): string {
  // Each "é" is two bytes and one character: as many of them as the injected response has bytes
  // leave exactly that response after the length the upstream announced.
  const body = "é".repeat(INJECTED.length) + INJECTED;
  return `HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}

/** Answers that say their body ends before the bytes the upstream writes after it. */
const POISONED: Record<string, (ex: RawExchange) => string> = {
  "Content-Length counted in characters": countedInCharacters,
  "a body on a HEAD": () =>
    `HTTP/1.1 200 OK\r\nContent-Length: ${INJECTED.length}\r\n\r\n${INJECTED}`,
  "a body on a 204": () => `HTTP/1.1 204 No Content\r\n\r\n${INJECTED}`,
  "a body on a 304": () => `HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n${INJECTED}`,
};

t.test("bytes after a complete response never reach another request", async (t) => {
  for (const [what, answer] of Object.entries(POISONED)) {
    for (const when of ["in the same write", "with the next request waiting", "a moment later"]) {
      t.test(`${what}, ${when}`, async (t) => {
        const upstream = await startRawUpstream((ex) => {
          if (ex.path === "/v1/account") {
            ex.socket.write(OWN);
            return;
          }
          const text = answer(ex);
          if (when === "in the same write") {
            ex.socket.write(Buffer.from(text, "utf8"));
            return;
          }
          if (when === "with the next request waiting") {
            // Long enough for the next request to be waiting for the one pooled connection.
            setTimeout(() => ex.socket.write(Buffer.from(text, "utf8")), 150);
            return;
          }
          const bytes = Buffer.from(text, "utf8");
          const tail = bytes.length - Buffer.byteLength(INJECTED);
          ex.socket.write(bytes.subarray(0, tail));
          setTimeout(() => ex.socket.write(bytes.subarray(tail)), 20);
        });
        const gh = await startTestGatehouse(ONE_SOCKET(upstream.url));
        t.teardown(async () => {
          await gh.close();
          await upstream.close();
        });
        const method = what.includes("HEAD") ? "HEAD" : "GET";
        const attack = send(`${gh.url}/v1/search?q=attack`, { method });
        let next;
        if (when === "with the next request waiting") {
          await eventually(async () => upstream.received.length > 0);
          next = send(`${gh.url}/v1/account`);
        } else {
          await attack;
          // Wait past the late bytes, so they are on the connection before the next request.
          await new Promise((done) => setTimeout(done, 60));
          next = send(`${gh.url}/v1/account`);
        }
        const first = await attack;
        t.ok([200, 204, 304].includes(first.status), "the attacker's own answer");
        const own = await next;
        t.equal(own.status, 200, "the next client gets its own status");
        t.equal(own.headers.location, undefined, "no Location of the attacker's");
        t.equal(own.headers["set-cookie"], undefined, "no cookie of the attacker's");
        t.equal(own.body.toString(), "your account");
      });
    }
  }
});

t.test("a connection paused for a slow client goes back to the pool readable", async (t) => {
  const BIG = 8 * 1024 * 1024;
  const upstream = await startRawUpstream((ex) => {
    if (ex.path === "/v1/big") {
      ex.socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${BIG}\r\n\r\n`);
      ex.socket.write(Buffer.alloc(BIG, 0x62));
    } else {
      ex.socket.write(OWN);
    }
  });
  // A long timeout: a request stuck on a paused connection shows as one that hangs, not as a
  // 504 a slow machine could give too.
  const gh = await startTestGatehouse(
    ONE_SOCKET(upstream.url).replace("timeout: 2s", "timeout: 60s"),
  );
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  // A pipelining client that asks for a large body and a small one, then reads nothing for a
  // while: gatehouse pauses the upstream connection while the client's buffers are full.
  const client: Socket = connect(gh.port, "127.0.0.1");
  client.pause();
  const head = (path: string) => `GET ${path} HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n`;
  client.write(head("/v1/big") + head("/v1/small"));
  await new Promise((done) => setTimeout(done, 200));
  let read = 0;
  let text = "";
  client.on("data", (chunk: Buffer) => {
    read += chunk.length;
    if (read > BIG) text += chunk.toString("latin1");
  });
  client.resume();
  t.ok(
    await eventually(async () => text.includes("your account")),
    "the pipelining client gets both answers",
  );
  client.destroy();
  const next = await send(`${gh.url}/v1/after`);
  t.equal(next.status, 200, "another client's request on the same connection is answered");
  t.equal(next.body.toString(), "your account");
});

t.test("a request is never written to a connection being closed for idleness", async (t) => {
  const upstream = await startRawUpstream((ex) => ex.socket.write(OWN));
  const gh = await startTestGatehouse(ONE_SOCKET(upstream.url, "\n  idle_timeout: 40ms"));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  // POSTs are never retried, so one written to a closing connection would be a 502. Each is
  // sent at a moment around the end of the idle time of the connection the one before used.
  const statuses: number[] = [];
  for (let i = 0; i < 40; i++) {
    await new Promise((done) => setTimeout(done, 30 + (i % 20)));
    const res = await send(`${gh.url}/v1/upload`, { method: "POST", body: `body ${i}` });
    statuses.push(res.status);
  }
  t.same(new Set(statuses), new Set([200]), "every POST answered by the upstream");
  const posts = upstream.received.filter((ex) => ex.method === "POST");
  t.equal(posts.length, 40, "each sent once");
});

t.test("interim responses to a client that does not read are bounded", async (t) => {
  let upstreamClosed = false;
  const upstream = await startRawUpstream((ex) => {
    // 1xx after 1xx, each with a large Link field, and never a final answer.
    const hints = `HTTP/1.1 103 Early Hints\r\nLink: </${"a".repeat(8000)}.css>; rel=preload\r\n\r\n`;
    ex.socket.on("close", () => (upstreamClosed = true));
    // As fast as gatehouse reads them: the upstream's own buffers stay small, so what the test
    // process holds is gatehouse's.
    const flood = (): void => {
      if (ex.socket.destroyed) return;
      while (ex.socket.write(hints));
      ex.socket.once("drain", flood);
    };
    flood();
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const before = process.memoryUsage().rss;
  const client = connect(gh.port, "127.0.0.1");
  client.pause();
  client.write("GET /v1/hints HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n");
  t.ok(await eventually(async () => upstreamClosed), "gatehouse ended the exchange");
  t.ok(process.memoryUsage().rss - before < 200 * 1024 * 1024, "memory stays bounded");
  const chunks: Buffer[] = [];
  client.on("data", (chunk: Buffer) => chunks.push(chunk));
  client.resume();
  await eventually(async () => Buffer.concat(chunks).includes("502 Bad Gateway"));
  client.destroy();
  const text = Buffer.concat(chunks).toString("latin1");
  const interim = text.split("HTTP/1.1 103 Early Hints").length - 1;
  t.ok(interim <= 10, `at most 10 interim responses relayed (${interim})`);
  t.match(text, /HTTP\/1\.1 502 Bad Gateway/, "then a 502");
  t.ok(
    gh.logs.some((l) => l.msg === "upstream failed" && l.reason === "bad_response"),
    "logged as a bad response",
  );
});

t.test("an upstream silent after its head is cut at upstream.timeout", async (t) => {
  const upstream = await startRawUpstream((ex) => {
    if (ex.path === "/v1/stall") {
      // The head and 7 bytes of 100, then nothing, the connection kept open.
      ex.socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
    } else {
      ex.socket.write(OWN);
    }
  });
  const gh = await startTestGatehouse(
    ONE_SOCKET(upstream.url).replace("timeout: 2s", "timeout: 300ms"),
  );
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const outcome = await new Promise<{ text: string; closed: boolean }>((resolve) => {
    const client = connect(gh.port, "127.0.0.1");
    let text = "";
    client.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
    client.on("error", () => undefined);
    client.on("close", () => resolve({ text, closed: true }));
    client.write("GET /v1/stall HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n");
  });
  t.ok(outcome.closed, "the client's connection is cut");
  const response = parseResponse(outcome.text);
  t.equal(response.status, 200, "the head had gone out");
  t.ok(response.body.endsWith("partial"), "the body stops where the upstream stopped");
  t.ok(response.body.length < 100, "visibly short of its Content-Length");
  const stalled = upstream.received.find((ex) => ex.path === "/v1/stall");
  t.ok(await eventually(async () => stalled?.socket.destroyed === true), "the slot is freed");
  const next = await send(`${gh.url}/v1/next`);
  t.equal(next.status, 200, "the one pooled slot serves the next request");
  t.ok(
    gh.logs.some((l) => l.msg === "upstream failed mid-answer" && l.reason === "body_timeout"),
    "logged as body_timeout",
  );
});

t.test("a status line without a status in 100-599 is a 502", async (t) => {
  const upstream = await startRawUpstream((ex) => {
    const status = ex.path.slice("/v1/status/".length);
    if (status === "") ex.socket.write(OWN);
    else ex.socket.write(`HTTP/1.1 ${status} Odd\r\nContent-Length: 2\r\n\r\nok`);
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  for (const status of ["099", "000", "600", "999"]) {
    const res = await send(`${gh.url}/v1/status/${status}`);
    t.equal(res.status, 502, status);
    t.match(json(res), { error: "bad_gateway" }, status);
  }
  t.equal((await send(`${gh.url}/v1/status/`)).status, 200, "the next request is served");
});

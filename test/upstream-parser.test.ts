/**
 * The pieces of the upstream client that need no socket: the shape of Node's private response
 * parser, the request head gatehouse writes, and the response fields it reads.
 */
import { createRequire } from "node:module";
import t from "tap";
import { InvalidFieldValue, requestHead, responseHeaders } from "../src/upstream/message-head.js";
import { nodeParserClass } from "../src/upstream/response-parser.js";

const nodeHttpCommon = createRequire(import.meta.url)("node:_http_common") as {
  HTTPParser: new () => unknown;
};

t.test("Node's parser has every member gatehouse uses, on this Node", (t) => {
  t.equal(nodeParserClass(nodeHttpCommon), nodeHttpCommon.HTTPParser);
  t.end();
});

t.test("a module without HTTPParser names it, and the file to see", (t) => {
  t.throws(() => nodeParserClass({}), {
    message:
      "node:_http_common lacks HTTPParser, RESPONSE, kLenientNone, kOnHeaders, " +
      "kOnHeadersComplete, kOnBody, kOnMessageComplete, initialize, execute, finish, close " +
      `on Node ${process.version}: see src/upstream/response-parser.ts`,
  });
  t.throws(() => nodeParserClass(undefined), { message: /lacks HTTPParser/ });
  t.end();
});

t.test("a parser class lacking some members names exactly those", (t) => {
  const real = nodeHttpCommon.HTTPParser as unknown as Record<string, unknown>;
  // Node's class, without `finish` on its prototype and without the body event's slot.
  class Partial {
    static RESPONSE = real.RESPONSE;
    static kLenientNone = real.kLenientNone;
    static kOnHeaders = real.kOnHeaders;
    static kOnHeadersComplete = real.kOnHeadersComplete;
    static kOnMessageComplete = real.kOnMessageComplete;
    initialize(): void {}
    execute(): void {}
    close(): void {}
  }
  const error = t.throws(() => nodeParserClass({ HTTPParser: Partial })) as Error;
  t.equal(
    error.message,
    `node:_http_common lacks kOnBody, finish on Node ${process.version}: ` +
      "see src/upstream/response-parser.ts",
  );
  t.end();
});

t.test("response fields", async (t) => {
  t.test("Set-Cookie lines stay a list, one entry per line", (t) => {
    const headers = responseHeaders(["Set-Cookie", "a=1; Path=/", "set-cookie", "b=2, c"]);
    t.same(headers["set-cookie"], ["a=1; Path=/", "b=2, c"]);
    t.same(responseHeaders(["Set-Cookie", "only=1"])["set-cookie"], ["only=1"], "even alone");
    t.end();
  });

  t.test("a repeated single-valued field keeps its first line", (t) => {
    const headers = responseHeaders([
      "Location",
      "/first",
      "Content-Type",
      "text/plain",
      "location",
      "/second",
      "ETag",
      '"v1"',
      "content-type",
      "application/json",
      "etag",
      '"v2"',
    ]);
    t.same(headers, { location: "/first", "content-type": "text/plain", etag: '"v1"' });
    t.end();
  });

  t.test("any other repeated field is joined with a comma, in order", (t) => {
    const headers = responseHeaders([
      "X-Multi",
      "a",
      "Vary",
      "Accept",
      "x-multi",
      "b",
      "X-MULTI",
      "c",
    ]);
    t.same(headers, { "x-multi": "a, b, c", vary: "Accept" });
    t.end();
  });
});

t.test("request head", async (t) => {
  t.test("field lines in the order given, a list as one line per entry", (t) => {
    const head = requestHead("GET", "/v1/items?a=1", {
      host: "upstream.test",
      "x-list": ["one", "two"],
      accept: "*/*",
      "x-absent": undefined,
    });
    t.equal(
      head,
      "GET /v1/items?a=1 HTTP/1.1\r\nhost: upstream.test\r\nx-list: one\r\nx-list: two\r\n" +
        "accept: */*\r\n",
    );
    t.end();
  });

  t.test("a bodiless POST, PUT or PATCH says Content-Length: 0; GET and DELETE do not", (t) => {
    for (const method of ["POST", "PUT", "PATCH"]) {
      t.equal(
        requestHead(method, "/", { host: "h" }),
        `${method} / HTTP/1.1\r\nhost: h\r\nContent-Length: 0\r\n`,
        method,
      );
    }
    for (const method of ["GET", "DELETE", "HEAD", "OPTIONS"]) {
      t.equal(
        requestHead(method, "/", { host: "h" }),
        `${method} / HTTP/1.1\r\nhost: h\r\n`,
        method,
      );
    }
    t.end();
  });

  t.test("no Content-Length: 0 is added when the request has its own framing", (t) => {
    t.equal(
      requestHead("POST", "/", { "content-length": "5" }),
      "POST / HTTP/1.1\r\ncontent-length: 5\r\n",
    );
    t.equal(
      requestHead("PUT", "/", { "transfer-encoding": "chunked" }),
      "PUT / HTTP/1.1\r\ntransfer-encoding: chunked\r\n",
    );
    t.end();
  });

  t.test("visible characters, spaces, tabs and obs-text pass", (t) => {
    const value = "a b\tc~\x80\xff";
    t.equal(requestHead("GET", "/", { "x-ok": value }), `GET / HTTP/1.1\r\nx-ok: ${value}\r\n`);
    t.end();
  });

  t.test("a value with CR, LF or NUL is refused, naming the field", (t) => {
    const values = {
      CR: "a\rb",
      LF: "a\nb",
      CRLF: "a\r\nInjected: yes",
      NUL: "a\0b",
    };
    for (const [what, value] of Object.entries(values)) {
      const error = t.throws(() => requestHead("GET", "/", { host: "h", "x-bad": value }), what);
      t.type(error, InvalidFieldValue, what);
      t.match(error, { code: "ERR_INVALID_CHAR", message: /"x-bad"/ }, what);
    }
    const inList = t.throws(() => requestHead("GET", "/", { "x-list": ["fine", "bad\n"] }));
    t.match(inList, { message: /"x-list"/ }, "an entry of a list too");
    t.end();
  });
});

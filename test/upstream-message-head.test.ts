/**
 * Repeated response fields reach the client as Node's own client reads them, from the fields as
 * undici parses them (its `util.parseHeaders`, which its dispatcher uses).
 */
import t from "tap";
import { util } from "undici";
import { isFieldText, responseHeaders } from "../src/upstream/message-head.js";

const parsed = (lines: string[]) =>
  responseHeaders(util.parseHeaders(lines.map((l) => Buffer.from(l, "latin1"))));

t.test("Set-Cookie lines stay a list, one entry per line", (t) => {
  const headers = parsed(["Set-Cookie", "a=1; Path=/", "set-cookie", "b=2, c"]);
  t.same(headers["set-cookie"], ["a=1; Path=/", "b=2, c"]);
  t.same(parsed(["Set-Cookie", "only=1"])["set-cookie"], ["only=1"], "even alone");
  t.end();
});

t.test("a repeated single-valued field keeps its first line", (t) => {
  const headers = parsed([
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
  const headers = parsed(["X-Multi", "a", "Vary", "Accept", "x-multi", "b", "X-MULTI", "c"]);
  t.same(headers, { "x-multi": "a, b, c", vary: "Accept" });
  t.end();
});

t.test("a field named __proto__ is dropped, never taken for the object's prototype", (t) => {
  const headers = parsed(["__proto__", "x", "__proto__", "y", "X-Fine", "1"]);
  t.same(Object.keys(headers), ["x-fine"]);
  t.equal(Object.getPrototypeOf(headers), Object.prototype);
  t.end();
});

t.test("obs-text survives: values are read as latin1, byte for byte", (t) => {
  t.equal(parsed(["X-Name", "caf\xe9"])["x-name"], "caf\xe9");
  t.end();
});

t.test("field text: visible characters, spaces, tabs and obs-text; no CR, LF, NUL or DEL", (t) => {
  t.ok(isFieldText("a b\tc~\x80\xff"));
  for (const bad of ["a\rb", "a\nb", "a\0b", "Not\x7fFound"])
    t.notOk(isFieldText(bad), JSON.stringify(bad));
  t.end();
});

/**
 * Request headers with `_` in their name, through real sockets to an upstream that records the
 * names exactly as they arrive: CGI, WSGI, Rack and PHP read `X_Client_Id` as `X-Client-Id`, so
 * such a name must never reach the upstream where it would pass for a header gatehouse set.
 */
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { rawRequest } from "./helpers/raw.js";
import { startRawUpstream, type RawExchange } from "./helpers/raw-upstream.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const DROPPED = "gatehouse_request_headers_dropped_total";
const CLIENT = { id: "reporting-app", secret: "s3cret-reporting", extra: ["scopes: [read]"] };

const ROUTES = `tokens:
  scopes: [read]
routes:
  - path: /open
    methods: [GET]
    auth: none
  - path: /v1/**
    methods: [GET]
`;

const upstream = await startRawUpstream((exchange) => exchange.socket.write(OK));
const clients = await clientsYaml([CLIENT]);
const dropping = await startTestGatehouse(configFor(upstream.url, `${ROUTES}${clients}`));
const keeping = await startTestGatehouse(
  configFor(upstream.url, `${ROUTES}${clients}`).replace(
    "  timeout: 2s\n",
    "  timeout: 2s\n  underscore_headers: keep\n  identity_header: X-Caller-Id\n",
  ),
);
t.teardown(async () => {
  await dropping.close();
  await keeping.close();
  await upstream.close();
});

// Sends `fields` (raw lines) to `port` and returns what the upstream received.
async function forwarded(port: number, path: string, fields: string): Promise<RawExchange> {
  const before = upstream.received.length;
  const res = await rawRequest(
    port,
    `GET ${path} HTTP/1.1\r\nHost: gatehouse.test\r\n${fields}Connection: close\r\n\r\n`,
  );
  if (res.status !== 200) throw new Error(`answered ${res.status}: ${res.body}`);
  const seen = upstream.received[before];
  if (seen === undefined) throw new Error("nothing reached the upstream");
  return seen;
}

const withUnderscore = (names: readonly string[]) => names.filter((name) => name.includes("_"));

t.test("by default every name with _ is dropped, and each line counted", async (t) => {
  const before = (await metric(dropping, DROPPED, { reason: "underscore" })) || 0;
  const seen = await forwarded(
    dropping.port,
    "/open",
    "X_Client_Id: admin\r\nX-Client_Scopes: admin\r\nMy_Header: 1\r\nmy_header: 2\r\n" +
      "X_Forwarded_For: 10.9.9.9\r\nX-Plain: kept\r\n",
  );
  t.same(withUnderscore(seen.rawNames), [], "no name with _ reaches the upstream");
  t.equal(seen.headers["x-plain"], "kept", "other fields are forwarded");
  t.equal(seen.headers["x-forwarded-for"], "127.0.0.1", "gatehouse's own claim stands alone");
  t.equal(seen.headers["x-client-id"], undefined);
  t.equal(await metric(dropping, DROPPED, { reason: "underscore" }), before + 5);
  const labels = (await (await fetch(`${dropping.adminUrl}/metrics`)).text())
    .split("\n")
    .filter((line) => line.startsWith(DROPPED));
  t.notMatch(labels.join("\n"), /client|header_name|my_header/i, "no header name as a label");
});

t.test("a request without _ in any name counts nothing", async (t) => {
  const before = (await metric(dropping, DROPPED, { reason: "underscore" })) || 0;
  const seen = await forwarded(dropping.port, "/open", "X-Plain: 1\r\nX-Value: a_b\r\n");
  t.equal(seen.headers["x-value"], "a_b", "a _ in a value is nobody's concern");
  t.equal((await metric(dropping, DROPPED, { reason: "underscore" })) || 0, before);
});

t.test("an authenticated client's identity cannot be joined by an underscore copy", async (t) => {
  const token = await obtainToken(dropping.url, CLIENT, [["scope", "read"]]);
  const seen = await forwarded(
    dropping.port,
    "/v1/items",
    `Authorization: Bearer ${token}\r\nX_Client_Id: admin\r\nX_Client_Scopes: admin\r\n`,
  );
  t.equal(seen.headers["x-client-id"], CLIENT.id);
  t.equal(seen.headers["x-client-scopes"], "read");
  t.same(withUnderscore(seen.rawNames), []);
});

t.test("keep forwards names with _ except those aliasing a header gatehouse owns", async (t) => {
  const before = (await metric(keeping, DROPPED, { reason: "alias" })) || 0;
  const aliases = [
    "X_Caller_Id", // the configured identity header
    "X_Client_Scopes", // the scopes header
    "X_Client_Issuer", // the issuer header
    "X_Forwarded_For",
    "x_forwarded_anything", // the whole X-Forwarded- family
    "X_Real_IP",
    "X_Request_Id",
    "Proxy_Authorization",
    "Keep_Alive",
    "HTTP2_Settings",
    "Accept_Language",
    "Transfer_Encoding",
  ];
  const seen = await forwarded(
    keeping.port,
    "/open",
    `${aliases.map((name) => `${name}: forged\r\n`).join("")}Legacy_Flag: on\r\nX-Plain: 1\r\n`,
  );
  t.same(
    withUnderscore(seen.rawNames).map((name) => name.toLowerCase()),
    ["legacy_flag"],
    "only the name aliasing nothing of gatehouse's is forwarded",
  );
  t.equal(seen.headers.legacy_flag, "on");
  t.notOk(Object.values(seen.headers).includes("forged"), "no forged value arrives");
  t.equal(await metric(keeping, DROPPED, { reason: "alias" }), before + aliases.length);
  t.ok(
    Number.isNaN(await metric(keeping, DROPPED, { reason: "underscore" })),
    "nothing is dropped for the _ alone",
  );
});

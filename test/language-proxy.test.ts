/**
 * The language stage through real sockets: the one Accept-Language flag and the query string the
 * upstream receives, Vary on the response, and the 400s that never reach the upstream.
 */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import { startUpstream, type Received } from "./helpers/upstream.js";
import { CANONICAL, REFUSED, forwardedTarget } from "./helpers/translation-cases.js";

const ROUTES = `routes:
  - path: /v1/items
    methods: [GET, POST]
    auth: none
`;

const upstream = await startUpstream();
const echo = upstream.handler;
const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
const repeat = await startTestGatehouse(
  configFor(
    upstream.url,
    `${ROUTES}languages:
  supported: [de, fr, it]
  default: de
  translation:
    max: 2
    on_unsupported: drop
    forward_as: repeat
`,
  ),
);
t.teardown(async () => {
  await gh.close();
  await repeat.close();
  await upstream.close();
});

/** What the upstream received for one request sent through `port`. */
async function through(
  url: string,
  target: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; seen: Received | undefined; vary: string | undefined }> {
  const before = upstream.received.length;
  const response = await send(`${url}${target}`, { headers });
  const seen = upstream.received.length > before ? upstream.received.at(-1) : undefined;
  const vary = response.headers.vary;
  return { status: response.status, seen, vary };
}

function acceptLanguageLines(seen: Received): string[] {
  const values: string[] = [];
  for (let i = 0; i < seen.rawHeaders.length; i += 2) {
    if ((seen.rawHeaders[i] as string).toLowerCase() === "accept-language") {
      values.push(seen.rawHeaders[i + 1] as string);
    }
  }
  return values;
}

// A representative subset of test/language-accept.test.ts: one case of each way a header can be
// odd or hostile, and more. [Accept-Language sent, the flag forwarded, why]
const overTheWire: Array<[string | undefined, string, string]> = [
  [undefined, "en", "absent"],
  ["", "en", "empty"],
  ["fr-CA, fr;q=0.9, en;q=0.8", "fr", "region truncated by lookup"],
  ["de-DE-1996", "de", "truncation over two subtags"],
  ["EN-gb", "en", "upper-case language"],
  ["*", "en", "star alone is the default"],
  ["ja, zh-Hant", "en", "nothing supported"],
  ["fr;q=0, de;q=0.5", "de", "q=0 excludes"],
  ["en;q=0, fr;q=0, de;q=0, es;q=0, it;q=0", "en", "every supported excluded: default"],
  ["fr;q=2, it;q=0.1", "it", "a weight above 1 skips its member"],
  ["en_US", "en", "underscore read as hyphen"],
  ["fran\u00e7ais", "en", "non-ASCII"],
  [`${"xx, ".repeat(40)}fr`, "en", "beyond 32 members"],
  ["*, es;q=0.5", "es", "star beside a range"],
];

t.test("the upstream receives exactly one supported flag", async (t) => {
  for (const [header, flag, why] of overTheWire) {
    const headers: Record<string, string> =
      header === undefined ? {} : { "accept-language": header };
    const { status, seen, vary } = await through(gh.url, "/v1/items", headers);
    t.equal(status, 200, `${why}: forwarded`);
    t.strictSame(seen && acceptLanguageLines(seen), [flag], `${why}: Accept-Language: ${flag}`);
    t.equal(vary, "Accept-Language", `${why}: Vary`);
  }
});

t.test("two Accept-Language lines are one list, replaced by one flag", async (t) => {
  const before = upstream.received.length;
  const response = await rawRequest(
    gh.port,
    "GET /v1/items HTTP/1.1\r\nHost: x\r\nAccept-Language: it\r\nAccept-Language: de\r\n" +
      "Connection: close\r\n\r\n",
  );
  t.equal(response.status, 200);
  const seen = upstream.received[before];
  t.strictSame(seen && acceptLanguageLines(seen), ["it"]);
});

t.test("a 14 KB header of 2,000 ranges is answered, with the default", async (t) => {
  const header = Array.from(
    { length: 2000 },
    (_, i) => `zz-${String(i % 1000).padStart(3, "0")}`,
  ).join(",");
  t.ok(header.length > 13_000 && header.length < 15_000, `${header.length} bytes`);
  const { status, seen } = await through(gh.url, "/v1/items", { "accept-language": header });
  t.equal(status, 200);
  t.strictSame(seen && acceptLanguageLines(seen), ["en"]);
});

t.test("Vary is merged with the upstream's", async (t) => {
  t.teardown(() => {
    upstream.handler = echo;
  });
  upstream.handler = (req, res) => {
    res.writeHead(200, { vary: req.url?.includes("own") ? "accept-language" : "Accept-Encoding" });
    res.end("ok");
  };
  const other = await through(gh.url, "/v1/items", { "accept-language": "fr" });
  t.equal(other.vary, "Accept-Encoding, Accept-Language", "added to the upstream's Vary");
  const own = await through(gh.url, "/v1/items?own", { "accept-language": "fr" });
  t.equal(own.vary, "accept-language", "not repeated when the upstream already varies on it");
});

t.test("translation_language: the query string the upstream receives", async (t) => {
  for (const [query, forwarded, why] of CANONICAL) {
    const { status, seen } = await through(gh.url, `/v1/items?${query}`);
    t.equal(status, 200, `${why}: forwarded`);
    t.equal(seen?.url, forwardedTarget("/v1/items", forwarded), `${why}: ${query}`);
  }
});

t.test("translation_language: 400 invalid_request, nothing forwarded", async (t) => {
  for (const [query, message, why] of REFUSED) {
    const before = upstream.received.length;
    const response = await send(`${gh.url}/v1/items?${query}`);
    t.equal(response.status, 400, `${why}: 400`);
    t.equal(response.headers["content-type"], "application/json", `${why}: JSON`);
    t.strictSame(json(response), { error: "invalid_request", message }, `${why}: body`);
    t.equal(upstream.received.length, before, `${why}: not forwarded`);
  }
});

t.test("forward_as: repeat, on_unsupported: drop, another default", async (t) => {
  const cases: Array<[string, Record<string, string>, string, string]> = [
    [
      "?translation_language=FR,xx,de&n=1",
      { "accept-language": "en-GB, fr;q=0.4" },
      "/v1/items?translation_language=fr&translation_language=de&n=1",
      "fr",
    ],
    [
      "?translation_language=it,fr,de",
      { "accept-language": "en" },
      "/v1/items?translation_language=it&translation_language=fr",
      "de",
    ],
    ["?translation_language=xx&n=1", {}, "/v1/items?n=1", "de"],
  ];
  for (const [query, headers, url, flag] of cases) {
    const { status, seen } = await through(repeat.url, `/v1/items${query}`, headers);
    t.equal(status, 200, `${query}: forwarded`);
    t.equal(seen?.url, url, `${query}: query`);
    t.strictSame(seen && acceptLanguageLines(seen), [flag], `${query}: flag`);
  }
});

t.test("a reload changes the language tables", async (t) => {
  const dir = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(() => dir.close());
  const first = await through(dir.url, "/v1/items?translation_language=es", {
    "accept-language": "es",
  });
  t.equal(first.status, 200);
  t.strictSame(first.seen && acceptLanguageLines(first.seen), ["es"]);
  await dir.writeConfig(
    configFor(upstream.url, `${ROUTES}languages:\n  supported: [fr, it]\n  default: it\n`),
  );
  t.equal(await dir.gatehouse.reload(), "success");
  const after = await through(dir.url, "/v1/items", { "accept-language": "es" });
  t.strictSame(after.seen && acceptLanguageLines(after.seen), ["it"]);
  const refused = await send(`${dir.url}/v1/items?translation_language=es`);
  t.equal(refused.status, 400, "es is no longer supported");
});

/**
 * Guessing secrets and forging tokens, through real sockets: failed client authentications are
 * limited per client IP (an IPv6 client by its /64), never per client id, which anyone can learn
 * from a token's `sub`; beyond the limit every attempt from that IP, a correct one too, gets 429
 * unless the secret is remembered as correct. Bearer tokens that fail verification count
 * against their client IP too; beyond the limit, the IP's tokens that were never verified get 429
 * before any signature check. gatehouse trusts 127.0.0.1 here, so X-Forwarded-For gives each
 * request the client IP wanted.
 */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import {
  basic,
  clientsYaml,
  forged,
  form,
  obtainToken,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { sampleValue, scrape } from "./helpers/metrics.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
const OTHER: TestClient = { id: "billing", secret: "another-long-secret-for-billing" };
// Only the bearer tests use it, so no failed client authentication has counted against its id.
const READER: TestClient = { id: "reader", secret: "a-third-long-secret-for-the-reader" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

async function config(tokens = ""): Promise<string> {
  return configFor(
    upstream.url,
    `trusted_proxies: [127.0.0.1]
tokens:
${tokens}  failure_limit: { limit: 3, window: 1m }
${await clientsYaml([APP, OTHER, READER])}
routes:
  - path: /v1/items
    methods: [GET]
`,
  );
}

const g = await startTestGatehouse(await config());
t.teardown(() => g.close());

const from = (ip: string, authorization?: string): Record<string, string> =>
  authorization === undefined
    ? { "x-forwarded-for": ip }
    : { "x-forwarded-for": ip, authorization };

const attempt = (ip: string, client: TestClient, secret = client.secret, url = g.url) =>
  postToken(url, {
    headers: from(ip),
    body: form([
      ["client_id", client.id],
      ["client_secret", secret],
    ]),
  });

t.test("per client IP: after 3 failures every attempt from that IP is 429", async (t) => {
  const ip = "198.51.100.7";
  for (const id of ["nobody-1", "nobody-2", "nobody-3"]) {
    const failed = await attempt(ip, { id, secret: "guess" });
    t.equal(failed.status, 401, `failure ${id} answers 401`);
  }
  const refused = await attempt(ip, APP);
  t.equal(refused.status, 429, "a correct secret from that IP too");
  t.equal(refused.json.error, "rate_limited");
  t.type(refused.json.error_description, "string");
  t.equal(refused.headers["cache-control"], "no-store");
  const retryAfter = Number(refused.headers["retry-after"]);
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, "Retry-After 1..60");
  t.notOk("www-authenticate" in refused.headers, "a 429, not a challenge");

  const basicRefused = await postToken(g.url, { headers: from(ip, basic(APP.id, APP.secret)) });
  t.equal(basicRefused.status, 429, "with Basic as well");
  const malformed = await postToken(g.url, { headers: from(ip, "Basic !!!") });
  t.equal(malformed.status, 429, "and with malformed Basic");
  t.equal((await attempt("198.51.100.8", APP)).status, 200, "another IP is not affected");
});

t.test("a known client id cannot be locked out from other addresses", async (t) => {
  const before = await scrape(g);
  const counted = (text: string, client: string): number =>
    sampleValue(text, "gatehouse_token_failures_total", { client }) || 0;
  // Eleven wrong secrets for reporting-app, each from an address of its own, so no address
  // reaches its limit of 3: what locking the client out by its id alone would take.
  for (let i = 1; i <= 11; i++) {
    const failed = await attempt(`198.18.0.${i}`, { id: APP.id, secret: `guess-${i}` });
    t.equal(failed.status, 401, `wrong secret ${i}: 401`);
    t.equal(failed.json.error, "invalid_client");
  }
  for (const id of ["REPORTING-APP", " reporting-app", "nobody"]) {
    t.equal((await attempt("198.18.0.50", { id, secret: APP.secret })).status, 401, id);
  }
  const fresh = await attempt("198.18.0.99", APP);
  t.equal(fresh.status, 200, "the right secret from an address that has not failed: a token");
  t.type(fresh.json.access_token, "string");
  const after = await scrape(g);
  t.equal(counted(after, APP.id) - counted(before, APP.id), 11, "each failure counted for its id");
  t.equal(counted(after, "unknown") - counted(before, "unknown"), 3, "unlisted ids: unknown");
  t.notOk(
    /gatehouse_token_failures_total\{client="(REPORTING-APP| reporting-app|nobody)"\}/.test(after),
  );
});

t.test("successes are not counted", async (t) => {
  const ip = "192.0.2.50";
  for (let i = 0; i < 5; i++) t.equal((await attempt(ip, OTHER)).status, 200, `success ${i + 1}`);
  t.equal((await attempt(ip, OTHER, "wrong")).status, 401, "a failure after them is a 401");
});

// A fleet behind one address asks for tokens all at once: a secret that matched before is no
// guess, so however many are in flight it is neither counted nor refused.
t.test(
  "a remembered secret is not an attempt: more at once than the limit all get 200",
  async (t) => {
    const ip = "192.0.2.51";
    t.equal((await attempt(ip, READER)).status, 200, "the first is verified");
    const statuses = await Promise.all(
      Array.from({ length: 20 }, () => attempt(ip, READER).then((answer) => answer.status)),
    );
    t.strictSame(statuses, Array(20).fill(200), "20 at once, over a limit of 3");
    t.equal((await attempt(ip, READER, "wrong")).status, 401, "a wrong secret is still a failure");
  },
);

t.test("requests refused before authentication are not counted", async (t) => {
  const ip = "192.0.2.60";
  for (let i = 0; i < 4; i++) {
    const answer = await postToken(g.url, {
      headers: from(ip),
      body: form([["grant_type", "password"]]),
    });
    t.equal(answer.status, 400);
  }
  t.equal((await attempt(ip, OTHER)).status, 200);
});

t.test("the refusals are counted in the failures metric", async (t) => {
  const text = await scrape(g);
  t.match(text, /^gatehouse_auth_failures_total\{reason="rate_limited"\} [1-9]\d*$/m);
});

t.test("a reload keeps the failure counters", async (t) => {
  const ip = "192.0.2.70";
  for (const id of ["gone-1", "gone-2", "gone-3"]) {
    t.equal((await attempt(ip, { id, secret: "guess" })).status, 401);
  }
  await g.writeConfig(await config("  ttl: 30m\n"));
  t.equal(await g.gatehouse.reload(), "success");
  t.equal((await attempt(ip, OTHER)).status, 429, "still over the limit after the reload");
});

const get = (ip: string, token: string, url = g.url) =>
  send(`${url}/v1/items`, {
    headers: { "x-forwarded-for": ip, authorization: `Bearer ${token}` },
  });

t.test("per IPv6 /64: rotating addresses inside the prefix does not escape", async (t) => {
  const failures: Array<[string, string]> = [
    ["2001:db8:7:1::1", "nobody-v6-1"],
    ["2001:db8:7:1::2", "nobody-v6-2"],
    ["2001:db8:7:1::1", "nobody-v6-3"],
  ];
  for (const [ip, id] of failures) {
    t.equal((await attempt(ip, { id, secret: "guess" })).status, 401, `${ip} ${id}: 401`);
  }
  const refused = await attempt("2001:db8:7:1:abcd:ef01:2345:6789", OTHER);
  t.equal(refused.status, 429, "a third address of the /64, with a correct secret: 429");
  t.equal(refused.json.error, "rate_limited");
  const token = await obtainToken(g.url, READER);
  t.equal(
    (await get("2001:db8:7:1::99", token)).status,
    429,
    "the bearer check shares the /64's bucket",
  );
  t.equal((await attempt("2001:db8:7:2::1", OTHER)).status, 200, "the next /64 is another client");
  t.equal((await get("2001:db8:7:2::1", token)).status, 200, "and its tokens verify");
});

t.test("after 3 refused tokens, an IP's unverified tokens get 429 unchecked", async (t) => {
  const ip = "203.0.113.10";
  const used = await obtainToken(g.url, READER);
  const fresh = await obtainToken(g.url, READER);
  t.equal((await get(ip, used)).status, 200, "a token used, and so verified, before the flood");

  for (let i = 1; i <= 3; i++) {
    const refused = await get(ip, forged(used));
    t.equal(refused.status, 401, `forged token ${i}: 401`);
    t.equal(json(refused).error, "invalid_token");
  }
  const limited = await get(ip, forged(used));
  t.equal(limited.status, 429, "the 4th: 429");
  t.strictSame(
    { ...json(limited), message: typeof json(limited).message },
    {
      error: "rate_limited",
      message: "string",
      retry_after: Number(limited.headers["retry-after"]),
      limit: 3,
      window: "1m",
    },
  );
  const retryAfter = Number(limited.headers["retry-after"]);
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, "Retry-After 1..60");
  t.equal(limited.headers["content-type"], "application/json");
  t.notOk("www-authenticate" in limited.headers, "a 429, not a challenge");
  t.notOk("x-ratelimit-limit" in limited.headers, "the plan's limiter was never reached");

  t.equal((await get(ip, fresh)).status, 429, "a valid token never verified: refused unchecked");
  t.equal((await get(ip, used)).status, 200, "a token verified before the flood still passes");
  t.equal(upstream.received.at(-1)?.headers["x-client-id"], READER.id);

  // READER's secret matched when its tokens were issued: remembered, it is no guess and passes.
  t.equal((await attempt(ip, READER)).status, 200, "a remembered secret is not refused");
  const guess = await attempt(ip, READER, "a-guess-at-the-readers-secret");
  t.equal(guess.status, 429, "the IP's count is the token endpoint's too: any other secret is 429");

  const other = "203.0.113.11";
  t.equal((await get(other, forged(used))).status, 401, "another IP: its own count");
  t.equal((await get(other, fresh)).status, 200, "and its valid tokens verify");
});

t.test("malformed and missing tokens are answered cheaply and not counted", async (t) => {
  const ip = "203.0.113.20";
  for (let i = 0; i < 4; i++) {
    t.equal((await get(ip, "not a token")).status, 400, "malformed: 400");
    const missing = await send(`${g.url}/v1/items`, { headers: { "x-forwarded-for": ip } });
    t.equal(missing.status, 401, "missing: 401");
  }
  const token = await obtainToken(g.url, READER);
  t.equal((await get(ip, forged(token))).status, 401, "the first verified failure is still a 401");
});

t.test("expired tokens are refused but not counted: their client is renewing", async (t) => {
  let now = Date.now();
  const clocked = await startTestGatehouse(await config(), { now: () => now });
  t.teardown(() => clocked.close());
  const ip = "203.0.113.30";
  const old = await obtainToken(clocked.url, READER);
  now += 24 * 60 * 60 * 1000;
  for (let i = 1; i <= 5; i++) {
    const expired = await get(ip, old, clocked.url);
    t.equal(expired.status, 401, `expired token ${i}: 401`);
  }
  const asked = await attempt(ip, READER, READER.secret, clocked.url);
  t.equal(asked.status, 200, "a new token from that address: 200, not 429");
  const renewed = asked.json.access_token as string;
  t.equal((await get(ip, renewed, clocked.url)).status, 200, "the renewed token passes at once");
  for (let i = 1; i <= 3; i++) await get(ip, forged(renewed), clocked.url);
  t.equal((await get(ip, forged(renewed), clocked.url)).status, 429, "bad signatures still count");
});

// After a restart with a generated key (or a key rotated out), every token a client holds names a
// kid no key has: the client did nothing wrong and must get a new token, not a 429.
t.test("tokens with an unknown kid are refused but not counted", async (t) => {
  const before = await startTestGatehouse(await config());
  const old = await obtainToken(before.url, READER);
  await before.close();
  const ip = "203.0.113.40";
  for (let i = 1; i <= 10; i++) {
    const refused = await get(ip, old);
    t.equal(refused.status, 401, `unknown kid ${i}: 401`);
    t.equal(json(refused).error, "invalid_token");
  }
  const asked = await attempt(ip, READER);
  t.equal(asked.status, 200, "a new token from that address: 200, not 429");
  t.equal((await get(ip, asked.json.access_token as string)).status, 200, "and it passes");
  const text = await scrape(g);
  t.ok(sampleValue(text, "gatehouse_auth_failures_total", { reason: "bearer_unknown_kid" }) >= 10);
});

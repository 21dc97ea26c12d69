/**
 * BAD_INPUTS D10 through real sockets: bearer tokens that fail verification count against their
 * client IP in `tokens.failure_limit`; beyond it, the IP's tokens that were never verified are
 * refused with 429 before any signature check. gatehouse trusts 127.0.0.1 here, so
 * X-Forwarded-For gives each request the client IP wanted.
 */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, form, obtainToken, postToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `trusted_proxies: [127.0.0.1]
tokens:
  failure_limit: { limit: 3, window: 1m }
${await clientsYaml([APP])}
routes:
  - path: /v1/items
    methods: [GET]
`,
  ),
);
t.teardown(() => g.close());

const get = (ip: string, token: string) =>
  send(`${g.url}/v1/items`, {
    headers: { "x-forwarded-for": ip, authorization: `Bearer ${token}` },
  });

// A token of the right form and key id whose signature does not verify: the costly kind. A
// character early in the signature is changed: the last one also carries padding bits.
function forged(token: string): string {
  const at = token.lastIndexOf(".") + 2;
  const swapped = token[at] === "A" ? "B" : "A";
  return `${token.slice(0, at)}${swapped}${token.slice(at + 1)}`;
}

t.test("after 3 refused tokens, an IP's unverified tokens get 429 unchecked", async (t) => {
  const ip = "203.0.113.10";
  const used = await obtainToken(g.url, APP);
  const fresh = await obtainToken(g.url, APP);
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
  t.equal(upstream.received.at(-1)?.headers["x-client-id"], APP.id);

  const tokenAttempt = await postToken(g.url, {
    headers: { "x-forwarded-for": ip },
    body: form([
      ["client_id", APP.id],
      ["client_secret", APP.secret],
    ]),
  });
  t.equal(tokenAttempt.status, 429, "the IP's count is the token endpoint's too");

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
  const token = await obtainToken(g.url, APP);
  t.equal((await get(ip, forged(token))).status, 401, "the first verified failure is still a 401");
});

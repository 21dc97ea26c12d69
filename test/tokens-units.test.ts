/**
 * Table-driven tests of the token helpers: secrets, request parsing, grants, the verified-token
 * cache.
 */
import t from "tap";
import type { TokenSettings } from "../src/tokens/settings.js";
import { createFailureLimiter } from "../src/limits/failures.js";
import { createOutage } from "../src/limits/outage.js";
import { createMemoryStore } from "../src/limits/memory-store.js";
import { createMetrics } from "../src/metrics.js";
import { issueToken } from "../src/tokens/issue.js";
import { compileGrants, grantFor, type Grant } from "../src/tokens/grants.js";
import { generateKeyPairFor, keyRing } from "../src/tokens/keys.js";
import { memoized } from "../src/tokens/memo.js";
import { createRememberedSecrets } from "../src/tokens/remembered.js";
import { BUSY, createWorkBound } from "../src/tokens/work-bound.js";
import { manualClock } from "./helpers/clock.js";
import {
  parseBasicCredentials,
  parseTokenBody,
  queryHasCredentials,
} from "../src/tokens/request.js";
import {
  dummyRecord,
  formatRecord,
  hashSecret,
  parseSecretHash,
  verifySecret,
} from "../src/tokens/secrets.js";
import { createTokenVerifier, createVerifiedCache, TokenRejected } from "../src/tokens/verify.js";

t.test("secret_hash: hash, parse and verify", async (t) => {
  const text = await hashSecret("s3cret value");
  t.match(text, /^scrypt\$ln=14,r=8,p=1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  const record = parseSecretHash(text);
  if (typeof record === "string") throw new Error(record);
  t.equal(formatRecord(record), text, "parse and format are inverse");
  t.ok(await verifySecret("s3cret value", record));
  t.notOk(await verifySecret("s3cret valuE", record));
  t.notOk(await verifySecret("", record));
  t.notOk(
    await verifySecret("s3cret value", dummyRecord(record.params)),
    "the dummy never matches",
  );
  t.not(await hashSecret("s3cret value"), text, "a new salt each time");
});

t.test("secret_hash: malformed values are refused with a reason", async (t) => {
  const good = await hashSecret("x");
  for (const value of [
    "scrypt$",
    "bcrypt$2b$10$abc",
    good.replace("ln=14", "ln=9"),
    good.replace("ln=14", "ln=21"),
    good.replace("r=8", "r=0"),
    good.replace("p=1", "p=5"),
    good.slice(0, -4),
    good.replace(/\$([^$]+)\$([^$]+)$/, "$$short$$$2"),
  ]) {
    t.type(parseSecretHash(value), "string", value);
  }
});

t.test("Basic credentials: base64, first colon, then form-urldecoding", async (t) => {
  const b = (text: string) => Buffer.from(text).toString("base64");
  const cases: Array<[string, { id: string; secret: string } | undefined]> = [
    [b("app:secret"), { id: "app", secret: "secret" }],
    [b("app:se:cr:et"), { id: "app", secret: "se:cr:et" }],
    [b("a%3Ab:c+d%2B"), { id: "a:b", secret: "c d+" }],
    [b("app:caf%C3%A9"), { id: "app", secret: "café" }],
    [b("app"), undefined],
    [b(":secret"), undefined],
    [b("app:"), undefined],
    [b("app:%zz"), undefined],
    [b("app:%C0%AF"), undefined],
    ["not base64!", undefined],
    [b("app:secret").slice(0, -1), undefined],
    [Buffer.from([0x61, 0x3a, 0xff]).toString("base64"), undefined],
  ];
  for (const [input, expected] of cases)
    t.strictSame(parseBasicCredentials(input), expected, input);
});

t.test("token bodies: fields, aliases, empty values, repeats", async (t) => {
  const form = (text: string) => parseTokenBody(Buffer.from(text), "form");
  const none = { clientAssertionType: undefined, clientAssertion: undefined, token: undefined };
  t.strictSame(form("grant_type=client_credentials&client_id=a&client_secret=b+c%21"), {
    ...none,
    grantType: "client_credentials",
    clientId: "a",
    clientSecret: "b c!",
    scope: undefined,
    resources: [],
  });
  t.strictSame(form("CLIENT_ID=a&CLIENT_SECRET=b&scope=x+y&foo&resource=urn%3Aa&resource=urn:b"), {
    ...none,
    grantType: undefined,
    clientId: "a",
    clientSecret: "b",
    scope: "x y",
    resources: ["urn:a", "urn:b"],
  });
  t.strictSame(form("grant_type=&client_id=&&scope=&resource="), {
    ...none,
    grantType: undefined,
    clientId: undefined,
    clientSecret: undefined,
    scope: undefined,
    resources: [],
  });
  t.strictSame(
    form("client_assertion_type=urn%3Aa&client_assertion=x.y.z&token=t&token_type_hint=h"),
    {
      grantType: undefined,
      clientId: undefined,
      clientSecret: undefined,
      scope: undefined,
      resources: [],
      clientAssertionType: "urn:a",
      clientAssertion: "x.y.z",
      token: "t",
    },
    "the assertion and the token to revoke are read; token_type_hint is not",
  );
  t.strictSame(parseTokenBody(Buffer.alloc(0), undefined).clientId, undefined, "empty body");
  for (const body of [
    "client_id=a&client_id=a",
    "client_id=a&CLIENT_ID=a",
    "scope=a&scope=b",
    "client_assertion=a&client_assertion=b",
    "token=a&token=b",
    "x=%zz",
    "x=%FF",
  ]) {
    t.throws(() => form(body), { code: "invalid_request", status: 400 }, body);
  }
  t.throws(() => parseTokenBody(Buffer.from("a=b"), undefined), { code: "invalid_request" });
  const json = (value: unknown) => parseTokenBody(Buffer.from(JSON.stringify(value)), "json");
  t.equal(json({ client_id: "a", other: 1 }).clientId, "a");
  t.strictSame(json({ resource: ["urn:a", "urn:b"] }).resources, ["urn:a", "urn:b"]);
  t.strictSame(json({ resource: "urn:a", scope: "x" }).resources, ["urn:a"]);
  for (const value of [
    [],
    "text",
    null,
    { client_id: 1 },
    { grant_type: ["a"] },
    { resource: ["urn:a", 1] },
  ]) {
    t.throws(() => json(value), { code: "invalid_request" }, JSON.stringify(value));
  }
});

t.test("credentials in a query string are found under any spelling", async (t) => {
  const cases: Array<[string | null, boolean]> = [
    [null, false],
    ["", false],
    ["grant_type=client_credentials", false],
    ["a=1&client_secret=x", true],
    ["client%5Fid=x", true],
    ["CLIENT_ID", true],
    ["my_client_id=x", false],
    ["scope=a&resource=urn%3Ab", false],
  ];
  for (const [query, expected] of cases)
    t.equal(queryHasCredentials(query), expected, String(query));
});

async function settings(): Promise<TokenSettings> {
  return {
    path: "/oauth/token",
    revocationPath: "/oauth/revoke",
    issuer: "gatehouse",
    audience: "upstream",
    ttlSeconds: 60,
    clockToleranceSeconds: 5,
    assertionMaxLifetimeSeconds: 3600,
    keys: keyRing(await generateKeyPairFor("EdDSA"), []),
    clients: {
      secrets: new Map(),
      dummy: dummyRecord(),
      assertionKeys: new Map(),
      ids: new Set(),
    },
    verifyConcurrency: 1,
    failureLimit: { limit: 3, windowMs: 60_000, window: "1m" },
    ephemeralKey: true,
    scopes: [],
    grants: new Map(),
    trustedIssuers: [],
    ownTokens: true,
    dpop: {
      algorithms: ["ES256", "EdDSA"],
      iatWindowSeconds: 300,
      clockToleranceSeconds: 5,
      nonces: undefined,
      requiredClients: new Set(),
    },
    trust: "",
  };
}

const NO_GRANT: Grant = { scope: undefined, audience: "upstream" };

t.test("the verified-token cache: until exp plus the tolerance, bounded, oldest out", async (t) => {
  const config = await settings();
  const now = Date.UTC(2026, 0, 1);
  const verifier = createTokenVerifier(config, undefined, createVerifiedCache(2));
  const [a, b, c] = await Promise.all(
    ["a", "b", "c"].map(async (id) => (await issueToken(config, id, now, NO_GRANT)).token),
  );
  t.equal(verifier.cached(a as string, now), undefined, "nothing before a verification");
  t.equal((await verifier.verify(a as string, now)).clientId, "a");
  t.equal(verifier.cached(a as string, now + 64_999)?.clientId, "a", "until exp + tolerance");
  t.equal(verifier.cached(a as string, now + 65_000), undefined, "not after");
  await verifier.verify(a as string, now);
  await verifier.verify(b as string, now);
  await verifier.verify(c as string, now);
  t.equal(verifier.cached(a as string, now), undefined, "the oldest was forgotten");
  t.equal(verifier.cached(c as string, now)?.clientId, "c");
  const rejection = await verifier.verify(`${c}=`, now).catch((error: unknown) => error);
  t.type(rejection, TokenRejected);
  t.equal((rejection as TokenRejected).reason, "not_a_jwt");
  const expired = await verifier.verify(a as string, now + 66_000).catch((error: unknown) => error);
  t.equal((expired as TokenRejected).reason, "expired");
});

t.test("a verified token's scope claim is cached as a set", async (t) => {
  const config = await settings();
  const now = Date.UTC(2026, 0, 1);
  const verifier = createTokenVerifier(config);
  const scoped = await issueToken(config, "a", now, { scope: "x y", audience: "upstream" });
  const verified = await verifier.verify(scoped.token, now);
  t.equal(verified.scopes.text, "x y");
  t.strictSame([...verified.scopes.names], ["x", "y"]);
  t.equal(
    verifier.cached(scoped.token, now)?.scopes,
    verified.scopes,
    "the same set, not parsed again",
  );
  const plain = await issueToken(config, "b", now, NO_GRANT);
  t.equal((await verifier.verify(plain.token, now)).scopes.names.size, 0, "no claim, no scopes");
});

t.test(
  "grants: requested scopes, default scopes, resources (RFC 6749 §3.3, RFC 8707)",
  async (t) => {
    const grants = compileGrants(
      [
        {
          id: "app",
          secret_env: "X",
          scopes: ["items:read", "items:write", "reports:read"],
          default_scopes: ["items:read"],
          resources: ["https://api.example", "https://reports.example"],
          dpop: "optional",
        },
        { id: "all", secret_env: "X", scopes: ["items:read", "reports:read"], dpop: "optional" },
        { id: "none", secret_env: "X", scopes: [], dpop: "optional" },
      ],
      "https://api.example",
    );
    const app = grants.get("app")!;
    const grant = (scope: string | undefined, resources: string[] = []) =>
      grantFor(app, "https://api.example", { scope, resources });
    t.strictSame(grant(undefined), { scope: "items:read", audience: "https://api.example" });
    t.strictSame(grant("reports:read items:read reports:read").scope, "reports:read items:read");
    t.strictSame(grant(undefined, ["https://reports.example"]).audience, "https://reports.example");
    t.strictSame(grant(undefined, ["https://reports.example", "https://api.example"]).audience, [
      "https://reports.example",
      "https://api.example",
    ]);
    t.equal(
      grantFor(grants.get("all")!, "u", { scope: undefined, resources: [] }).scope,
      "items:read reports:read",
      "default_scopes defaults to all of scopes",
    );
    t.strictSame(
      grantFor(grants.get("none")!, "https://api.example", {
        scope: undefined,
        resources: ["https://api.example"],
      }),
      { scope: undefined, audience: "https://api.example" },
      "nothing granted; resources default to the audience",
    );
    for (const scope of [
      "admin",
      "items:read  reports:read",
      " items:read",
      'a"b',
      "items:read\\",
    ]) {
      t.throws(() => grant(scope), { code: "invalid_scope", status: 400 }, JSON.stringify(scope));
    }
    for (const resource of [
      "https://other.example",
      "https://api.example#x",
      "relative/path",
      "",
    ]) {
      t.throws(
        () => grant(undefined, [resource]),
        { code: "invalid_target", status: 400 },
        resource,
      );
    }
  },
);

t.test(
  "the failure limiter: per address only; peek counts nothing, successes are refunded",
  async (t) => {
    const limiter = createFailureLimiter(
      createMemoryStore({ now: Date.now, sweepEveryMs: 0 }),
      { limit: 2, windowMs: 60_000, window: "1m" },
      Date.now,
      manualClock(),
      createOutage({ kind: "memory" }, createMetrics()),
    );
    const ip = "192.0.2.1";
    t.ok((await limiter.peek(ip)).allowed);
    const first = await limiter.attempt(ip);
    t.ok(first.allowed, "1st");
    await limiter.settle(first, false);
    await limiter.settle(await limiter.attempt(ip), true);
    t.ok((await limiter.peek(ip)).allowed, "1 failure: under the limit");
    await limiter.settle(await limiter.attempt(ip), true);
    t.notOk((await limiter.peek(ip)).allowed, "2 failures: the address is at the limit");
    const refused = await limiter.attempt(ip);
    t.notOk(refused.allowed, "the 3rd attempt is over it");
    t.notOk(refused.crowded, "refused, not crowded: the failures happened");
    t.ok(refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 60);
    t.ok((await limiter.attempt("192.0.2.2")).allowed, "another address has its own count");
    await limiter.failed("192.0.2.4");
    t.ok((await limiter.peek("192.0.2.4")).allowed, "one refused bearer token: under the limit");
    await limiter.failed("192.0.2.4");
    t.notOk((await limiter.peek("192.0.2.4")).allowed, "two: at the limit, the address is refused");
  },
);

t.test("the failure limiter: attempts in flight crowd the budget but never refuse", async (t) => {
  const clock = manualClock();
  const limiter = createFailureLimiter(
    createMemoryStore({ now: Date.now, sweepEveryMs: 0 }),
    { limit: 2, windowMs: 60_000, window: "1m" },
    Date.now,
    clock,
    createOutage({ kind: "memory" }, createMetrics()),
  );
  const ip = "192.0.2.9";
  const one = await limiter.attempt(ip);
  const two = await limiter.attempt(ip);
  t.ok(one.allowed && two.allowed, "two in flight: the whole budget");
  t.ok((await limiter.peek(ip)).allowed, "attempts in flight are no failures");
  const third = await limiter.attempt(ip);
  t.strictSame([third.allowed, third.crowded], [false, true], "the third is crowded, not refused");

  let woken: boolean | undefined;
  const waiting = limiter.settled(ip, 1000).then((settled) => (woken = settled));
  const elsewhere = limiter.settled("192.0.2.10", 1000);
  await limiter.settle(one, false);
  t.equal(await waiting, true, "a settled attempt wakes the address's waiters");
  const again = await limiter.attempt(ip);
  t.ok(again.allowed, "and its room is taken by the next");
  await limiter.settle(two, true);
  await limiter.settle(again, true);
  const over = await limiter.attempt(ip);
  t.strictSame([over.allowed, over.crowded], [false, false], "two failures: refused");
  clock.advance(1000);
  t.equal(await elsewhere, false, "another address's waiter gives up at its wait");
  t.equal(woken, true);
});

t.test("memoized: one call per key, and a failed one is tried again", async (t) => {
  const calls: string[] = [];
  let fail = true;
  const make = memoized(async (key: string) => {
    calls.push(key);
    if (key === "flaky" && fail) throw new Error("not this time");
    return `${key}!`;
  });
  t.equal(await make("a"), "a!");
  t.equal(await make("a"), "a!");
  t.equal(make("b"), make("b"), "one promise, shared");
  await t.rejects(make("flaky"), /not this time/);
  fail = false;
  t.equal(await make("flaky"), "flaky!", "the next call makes it again");
  t.strictSame(calls, ["a", "b", "flaky", "flaky"]);
});

t.test("remembered secrets: only the one remembered, per client, until the ttl", async (t) => {
  const memo = createRememberedSecrets(1000);
  t.notOk(memo.knows("app", "s3cret", 0), "nothing before a success");
  memo.remember("app", "s3cret", 0);
  t.ok(memo.knows("app", "s3cret", 999), "within the ttl");
  t.notOk(memo.knows("app", "s3cret ", 999), "another secret is not known");
  t.notOk(memo.knows("other", "s3cret", 999), "nor the same secret for another client");
  t.notOk(memo.knows("app", "s3cret", 1000), "the ttl since it was remembered has passed");
  t.notOk(memo.knows("app", "s3cret", 1), "and it stays forgotten");
  memo.remember("app", "s3cret", 5);
  memo.remember("app", "n3w", 6);
  t.notOk(memo.knows("app", "s3cret", 7), "one secret per client: the latest");
  t.ok(memo.knows("app", "n3w", 7));
});

t.test("the work bound: at most `limit` at once, in order, BUSY after the wait", async (t) => {
  const clock = manualClock();
  let waiting = 0;
  const bound = createWorkBound(1, 1000, clock, {
    inc: () => void waiting++,
    dec: () => void waiting--,
  });
  const started: string[] = [];
  const gates = new Map<string, () => void>();
  const job = (name: string) => () =>
    new Promise<string>((done) => {
      started.push(name);
      gates.set(name, () => done(name));
    });
  const a = bound.run(job("a"));
  const b = bound.run(job("b"));
  const c = bound.run(job("c"));
  await Promise.resolve();
  t.strictSame(started, ["a"], "one at a time");
  t.equal(waiting, 2);
  gates.get("a")?.();
  t.equal(await a, "a");
  await new Promise(setImmediate);
  t.strictSame(started, ["a", "b"], "the first waiter goes next");
  t.equal(waiting, 1);
  clock.advance(999);
  t.equal(waiting, 1, "c still waits at 999 ms");
  clock.advance(1);
  t.equal(await c, BUSY, "and is given up at 1 s");
  t.equal(waiting, 0);
  t.strictSame(started, ["a", "b"], "c never ran");
  gates.get("b")?.();
  t.equal(await b, "b", "b was started before its wait ended");
  const d = bound.run(job("d"));
  await Promise.resolve();
  t.strictSame(started, ["a", "b", "d"], "the turn is free again");
  gates.get("d")?.();
  t.equal(await d, "d");
});

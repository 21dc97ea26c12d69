/**
 * Used assertion ids and revoked tokens shared through a real Redis: a replay is refused by the
 * other replica and an id is kept until its assertion's exp, a revocation reaches the other
 * replica within a second; with Redis killed, the revocation endpoint and the revoked-token
 * lookup follow `on_outage`.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { eventually, send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis, type TestRedis } from "./helpers/redis.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import {
  assertion,
  assertionRequest,
  jwksFiles,
  keyClient,
  keyClientsYaml,
  revokeWithSecret,
} from "./helpers/assertions.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { MAX_REVOCATIONS_PER_CLIENT } from "../src/tokens/marks.js";

const APP = { id: "reporting-app", secret: "a3f1c9d2e8b7a6f5c4d3e2f1a0b9c8d7" };
const batch = await keyClient("batch-job", "ES256");
const signingKey = await generateKeyPem("EdDSA");
let clock = Date.UTC(2026, 0, 5, 12);
const now = (): number => clock;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

type Policy = "local" | "open" | "closed";

/** A replica on `redis` under `prefix`, sharing the signing key and the clock. */
async function replica(t: Test, redis: TestRedis, prefix: string, onOutage: Policy) {
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  signing: { key_file: ./signing.pem }
${await clientsYaml([APP])}${keyClientsYaml([batch])}limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "${prefix}"
    timeout: 10s
    on_outage: ${onOutage}
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { now, files: { ...jwksFiles([batch]), "signing.pem": signingKey } },
  );
  t.teardown(() => g.close());
  t.ok(await connected(g), "Redis answers");
  return g;
}

const prefix = (): string => `gatehouse-marks-${randomBytes(6).toString("hex")}:`;
const call = (g: TestGatehouse, token: string) =>
  send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } });

t.test("two replicas on one Redis", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const shared = prefix();
  const a = await replica(t, redis, shared, "closed");
  const b = await replica(t, redis, shared, "closed");

  t.test("an assertion used at one replica is a replay at the other", async (t) => {
    const signed = await assertion(batch, now(), "gatehouse");
    t.equal((await assertionRequest(a.url, signed)).status, 200);
    const replay = await assertionRequest(b.url, signed);
    t.equal(replay.status, 401);
    t.equal(replay.json.error, "invalid_client");
  });

  t.test("an hour-long assertion's jti is kept in Redis until its exp", async (t) => {
    const exp = Math.floor(now() / 1000) + 3600;
    const signed = await assertion(batch, now(), "gatehouse", { jti: "hour-long", exp });
    t.equal((await assertionRequest(a.url, signed)).status, 200);
    const direct = new Redis(redis.url);
    t.teardown(() => direct.quit());
    // Until exp plus the clock tolerance (30s) as gatehouse's clock reads it: 3,630 s from now.
    const kept = (exp + 30) * 1000 - now();
    const left = await direct.pttl(`${shared}{client:${batch.id}}:once:hour-long`);
    t.ok(left <= kept && left > kept - 30_000, `${left} ms left of ${kept}`);
    t.equal((await assertionRequest(b.url, signed)).status, 401, "a replay at the other replica");
  });

  t.test("a token revoked at one replica is refused by the other", async (t) => {
    const token = await obtainToken(a.url, APP);
    const kept = await obtainToken(a.url, APP);
    t.equal((await call(b, token)).status, 200, "accepted by the other replica before");
    t.equal((await revokeWithSecret(a.url, APP, token)).status, 200);
    t.equal((await call(a, token)).status, 401, "the revoking replica refuses it at once");
    // The other replica's copy of the revoked ids is at most a second old.
    clock += 1000;
    const refused = await call(b, token);
    t.equal(refused.status, 401);
    t.match(refused.headers["www-authenticate"], /error_description="the token has been revoked"/);
    t.equal((await call(b, kept)).status, 200, "another token of the client is left alone");
  });
});

t.test("a client that holds its most revoked tokens in Redis is refused another", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const shared = prefix();
  const g = await replica(t, redis, shared, "closed");
  const direct = new Redis(redis.url);
  t.teardown(() => direct.quit());
  // The client's revoked ids, as MAX_REVOCATIONS_PER_CLIENT revocations still in force leave them.
  const held = `${shared}{revoked}:client:${APP.id}`;
  const inForce = now() + 3_600_000;
  await direct.zadd(
    held,
    ...Array.from({ length: MAX_REVOCATIONS_PER_CLIENT }, (_, i) => [inForce, `held-${i}`]).flat(),
  );
  const token = await obtainToken(g.url, APP);

  const refused = await revokeWithSecret(g.url, APP, token);
  t.equal(refused.status, 503, "RFC 7009: the token is not revoked, and the client may retry");
  t.equal(refused.json.error, "temporarily_unavailable");
  t.match(refused.json.error_description, `holds ${MAX_REVOCATIONS_PER_CLIENT} revoked tokens`);
  t.equal((await call(g, token)).status, 200, "the token stays good");

  // One of them ends: its place is free, and the ended id is dropped as the new one is added.
  await direct.zadd(held, now() - 1, "held-0");
  t.equal((await revokeWithSecret(g.url, APP, token)).status, 200);
  t.equal((await call(g, token)).status, 401, "revoked");
  t.equal(await direct.zcard(held), MAX_REVOCATIONS_PER_CLIENT);
  t.equal(await direct.zscore(held, "held-0"), null);
  t.equal(
    (await revokeWithSecret(g.url, APP, token)).status,
    200,
    "revoking it again is no new id",
  );
});

/** A replica whose Redis is killed once a token is issued and used and another revoked. */
async function outage(t: Test, policy: Policy) {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const g = await replica(t, redis, prefix(), policy);
  const used = await obtainToken(g.url, APP);
  const unrevoked = await obtainToken(g.url, APP);
  const revokedBefore = await obtainToken(g.url, APP);
  t.equal((await call(g, used)).status, 200);
  t.equal((await call(g, unrevoked)).status, 200);
  t.equal((await revokeWithSecret(g.url, APP, revokedBefore)).status, 200);
  await redis.kill();
  t.ok(
    await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 0),
    "the store sees Redis down",
  );
  // Past the copy's second, so the lookup must ask Redis.
  clock += 1000;
  return { g, used, unrevoked, revokedBefore };
}

t.test("on_outage: closed", async (t) => {
  const { g, used } = await outage(t, "closed");
  const revocation = await revokeWithSecret(g.url, APP, used);
  t.equal(revocation.status, 503);
  t.equal(revocation.json.error, "temporarily_unavailable");
  t.equal(revocation.headers["retry-after"], "1");
  const lookup = await call(g, used);
  t.equal(lookup.status, 503, "the revoked ids cannot be read");
  t.match(JSON.parse(lookup.body.toString()), { error: "limits_unavailable" });
  t.equal(lookup.headers["retry-after"], "1");
});

t.test("on_outage: local", async (t) => {
  const { g, used, unrevoked, revokedBefore } = await outage(t, "local");
  t.equal((await revokeWithSecret(g.url, APP, used)).status, 200, "recorded in the process");
  t.equal((await call(g, used)).status, 401, "the process's own record refuses it");
  t.equal((await call(g, revokedBefore)).status, 401, "the last copy from Redis still counts");
  t.equal((await call(g, unrevoked)).status, 200);
  const signed = await assertion(batch, now(), "gatehouse");
  t.equal((await assertionRequest(g.url, signed)).status, 200, "assertions go on");
  t.equal((await assertionRequest(g.url, signed)).status, 401, "a replay is still refused");
});

t.test("on_outage: open", async (t) => {
  const { g, used, unrevoked, revokedBefore } = await outage(t, "open");
  t.equal((await revokeWithSecret(g.url, APP, used)).status, 200, "recorded in the process");
  t.equal((await call(g, unrevoked)).status, 200);
  t.equal((await call(g, revokedBefore)).status, 200, "Redis's revoked ids are not checked");
  t.equal((await call(g, used)).status, 401, "what this process revoked itself still counts");
});

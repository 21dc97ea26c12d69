/**
 * The token endpoint cannot be made to spend the process on scrypt, through real sockets: at most
 * `tokens.verify_concurrency` secret verifications run at once, a request that waited 1 s for a
 * turn gets 503 `temporarily_unavailable` (the wait is timed by a manual clock, so "not sooner"
 * is checked exactly), health checks and forwarded requests are answered while the queue is full,
 * and a secret that matched before costs no scrypt and never waits, until the config changes or
 * `tokens.ttl` has passed.
 */
import t from "tap";
import { send } from "./helpers/client.js";
import { manualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import {
  clientsYaml,
  form,
  postToken,
  type TestClient,
  type TokenAnswer,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-0042" };
const BULK: TestClient = { id: "bulk", secret: "a-secret-presented-a-thousand-times" };
const ROTATED: TestClient = { id: "rotated", secret: "the-secret-before-the-rotation-01" };
const TTL_MS = 10 * 60 * 1000;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

async function config(clients: readonly TestClient[]): Promise<string> {
  return configFor(
    upstream.url,
    `trusted_proxies: [127.0.0.1]
tokens:
  ttl: 10m
  verify_concurrency: 1
  failure_limit: { limit: 100000, window: 1m }
${await clientsYaml(clients)}
routes:
  - path: /v1/open
    methods: [GET]
    auth: none
`,
  );
}

const clock = manualClock();
const g: TestGatehouse = await startTestGatehouse(await config([APP, BULK, ROTATED]), { clock });
t.teardown(() => g.close());

const attempt = (client: TestClient, secret = client.secret, ip = "192.0.2.1") =>
  postToken(g.url, {
    headers: { "x-forwarded-for": ip },
    body: form([
      ["client_id", client.id],
      ["client_secret", secret],
    ]),
  });

const verifications = (result: string): Promise<number> =>
  metric(g, "gatehouse_secret_verifications_total", { result }).then((v) => v || 0);

// Read in this process, so that reading it and moving the clock happen with no I/O in between.
async function waiting(): Promise<number> {
  return (await g.gatehouse.metrics.secretVerificationsWaiting.get()).values[0]?.value ?? 0;
}

// Busy verifications so far, read in this process for the same reason: a read over HTTP would let
// a verification finish meanwhile and hand its turn to a request the test counts as queued.
async function busyNow(): Promise<number> {
  const { values } = await g.gatehouse.metrics.secretVerifications.get();
  return values.find((value) => value.labels.result === "busy")?.value ?? 0;
}

// Polls until `ready`: no deadline of its own, the test's timeout is the only one.
async function until(ready: () => Promise<boolean>): Promise<void> {
  while (!(await ready())) await new Promise((done) => setTimeout(done, 5));
}

/** Wrong secrets for APP, `count` at once, each noting when it was answered. */
function flood(count: number): { answers: Promise<TokenAnswer[]>; answered: () => number } {
  let answered = 0;
  const answers = Promise.all(
    Array.from({ length: count }, (_, i) =>
      attempt(APP, `wrong-${i}`, `198.51.100.${i % 250}`).then((answer) => {
        answered++;
        return answer;
      }),
    ),
  );
  return { answers, answered: () => answered };
}

t.test(
  "a remembered secret never waits; a queued one gets 503 after 1 s, not sooner",
  async (t) => {
    t.equal((await attempt(APP)).status, 200, "the right secret, verified once");
    const matched = await verifications("match");
    const remembered = await verifications("remembered");
    const busy = await verifications("busy");
    const mismatched = await verifications("mismatch");

    const count = 30;
    const { answers, answered } = flood(count);
    await until(async () => (await waiting()) >= 5);
    const again = await attempt(APP);
    t.equal(again.status, 200, "the remembered secret is answered while the queue is full");
    t.ok(answered() < count, "before the queue in front of it had drained");
    t.equal(await verifications("match"), matched, "with no scrypt");
    t.equal(await verifications("remembered"), remembered + 1);

    await until(async () => (await waiting()) >= 1);
    // No I/O between reading the queue and moving the clock: exactly these requests time out.
    const queued = await waiting();
    clock.advance(999);
    const early = await busyNow();
    const stillQueued = await waiting();
    clock.advance(1);
    t.equal(early, busy, "no request was given up before 1 s");
    t.equal(stillQueued, queued, "and all of them were still waiting at 999 ms");

    const statuses = (await answers).map((answer) => answer.status);
    const refused = (await answers).filter((answer) => answer.status === 503);
    t.equal(refused.length, queued, "each request still waiting at 1 s: 503");
    t.equal(statuses.filter((status) => status === 401).length, count - queued, "the rest: 401");
    const first = refused[0] as TokenAnswer;
    t.equal(first.headers["retry-after"], "1");
    t.equal(first.headers["cache-control"], "no-store");
    t.equal(first.headers.pragma, "no-cache");
    t.equal(first.json.error, "temporarily_unavailable");
    t.type(first.json.error_description, "string");
    t.notOk("www-authenticate" in first.headers, "a 503, not a challenge");
    t.equal(await verifications("busy"), busy + queued, "counted as busy");
    t.equal(await verifications("mismatch"), mismatched + count - queued, "the rest ran scrypt");
    t.equal(await waiting(), 0);
  },
);

t.test("health checks and forwarding are answered while 200 wrong secrets queue", async (t) => {
  const count = 200;
  const { answers, answered } = flood(count);
  await until(async () => (await waiting()) >= 100);
  const forwarded = upstream.received.length;
  const health = await send(`${g.url}/healthz`);
  const open = await send(`${g.url}/v1/open`);
  const duringFlood = answered();
  const stillWaiting = await waiting();
  t.equal(health.status, 200, "/healthz");
  t.equal(open.status, 200, "a forwarded route");
  t.equal(upstream.received.length, forwarded + 1, "which reached the upstream");
  t.ok(duringFlood < count, `answered while ${count - duringFlood} flood requests were pending`);
  t.ok(stillWaiting > 0, "and verifications were still queued");

  clock.advance(1000);
  const statuses = new Set((await answers).map((answer) => answer.status));
  t.strictSame(
    [...statuses].sort(),
    [401, 503].filter((status) => statuses.has(status)),
  );
  t.equal((await send(`${g.url}/healthz`)).status, 200, "the process is still serving");
});

t.test("1,000 requests with the right secret cost one scrypt", async (t) => {
  const matched = await verifications("match");
  const remembered = await verifications("remembered");
  t.equal((await attempt(BULK)).status, 200, "the first is verified");
  // 37 batches of 27 at once: 999 more.
  for (let batch = 0; batch < 37; batch++) {
    const statuses = await Promise.all(
      Array.from({ length: 27 }, () => attempt(BULK).then((answer) => answer.status)),
    );
    t.ok(
      statuses.every((status) => status === 200),
      `batch ${batch + 1}`,
    );
  }
  t.equal(await verifications("match"), matched + 1, "one scrypt");
  t.equal(await verifications("remembered"), remembered + 999, "999 from memory");
});

t.test("a remembered secret is verified again once tokens.ttl has passed", async (t) => {
  t.equal((await attempt(BULK)).status, 200);
  const matched = await verifications("match");
  clock.advance(TTL_MS - 1);
  t.equal((await attempt(BULK)).status, 200);
  t.equal(await verifications("match"), matched, "remembered until the ttl");
  clock.advance(1);
  t.equal((await attempt(BULK)).status, 200);
  t.equal(await verifications("match"), matched + 1, "verified again after it");
});

t.test("a reload that changes the secret forgets the old one", async (t) => {
  t.equal((await attempt(ROTATED)).status, 200);
  t.equal((await attempt(ROTATED)).status, 200, "remembered");
  const next: TestClient = { id: ROTATED.id, secret: "the-secret-after-the-rotation-02" };
  await g.writeConfig(await config([APP, BULK, next]));
  t.equal(await g.gatehouse.reload(), "success");
  const mismatched = await verifications("mismatch");
  const old = await attempt(ROTATED);
  t.equal(old.status, 401, "the old secret is refused");
  t.equal(old.json.error, "invalid_client");
  t.equal(await verifications("mismatch"), mismatched + 1, "after a scrypt, not from memory");
  t.equal((await attempt(next)).status, 200, "the new one is accepted");
});

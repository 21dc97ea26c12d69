/**
 * The log lines an operator reads when something happens, parsed as JSON: an upstream failure with
 * its real error, Redis connecting, failing and coming back with what gatehouse does meanwhile,
 * and a reload naming what it changed.
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { startCli } from "./helpers/cli.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { refusingPort } from "./helpers/ports.js";
import { startTestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

type Line = Record<string, unknown>;

const OPEN_ROUTE = `routes:
  - path: /open
    methods: [GET]
    auth: none
`;

t.test("an unreachable upstream is logged with the error's code and syscall", async (t) => {
  const port = await refusingPort();
  const g = await startTestGatehouse(configFor(`http://127.0.0.1:${port}`, OPEN_ROUTE));
  t.teardown(() => g.close());
  const response = await fetch(`${g.url}/open`);
  t.equal(response.status, 502);
  const requestId = response.headers.get("x-request-id");
  const line = await g.logged((l) => l.msg === "upstream failed");
  t.equal(line.level, "warn");
  t.equal(line.requestId, requestId);
  t.strictSame(line.err, {
    type: "Error",
    message: `connect ECONNREFUSED 127.0.0.1:${port}`,
    errno: (line.err as Line).errno,
    code: "ECONNREFUSED",
    syscall: "connect",
    address: "127.0.0.1",
    port,
  });
  t.type((line.err as Line).errno, "number");
});

t.test("a warning says the error's type and message; its stack only at debug level", async (t) => {
  // A provider whose metadata names another issuer: a failed fetch of its keys, logged as a
  // warning with the error that says why.
  const provider = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ issuer: `${origin}/realms/evil`, jwks_uri: `${origin}/certs` }));
  });
  await new Promise<void>((done) => provider.listen(0, "127.0.0.1", done));
  t.teardown(() => provider.close());
  const origin = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-log-lines-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const warning = async (level: string): Promise<Line> => {
    const config = join(dir, `${level}.yaml`);
    await writeFile(
      config,
      `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
logging:
  level: ${level}
upstream:
  url: http://127.0.0.1:9
tokens:
  trusted_issuers:
    - name: corp
      issuer: ${origin}/realms/corp
`,
    );
    const cli = await startCli(["--config", config]);
    t.teardown(() => cli.stop("SIGTERM"));
    return cli.line(
      (l) => l.msg === "issuer keys cannot be fetched; the last good keys stay in use",
    );
  };
  const said = await warning("info");
  t.equal(said.level, "warn");
  t.equal(said.result, "issuer_mismatch");
  t.strictSame(said.err, {
    type: "KeysFetchFailed",
    message: `the metadata of ${origin}/realms/corp names the issuer "${origin}/realms/evil"`,
    result: "issuer_mismatch",
    name: "KeysFetchFailed",
  });
  const debugged = await warning("debug");
  t.match(
    (debugged.err as Line).stack,
    /^KeysFetchFailed: the metadata of .*\n\s+at /,
    "at debug level, the stack as well",
  );
});

t.test("Redis: connected, down with what on_outage does, then back again", async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const yaml = (onOutage: string) =>
    configFor(
      upstream.url,
      `plans:
  anonymous:
    rate_limit: { limit: 5, window: 1m }
limits:
  store: redis
  redis:
    url: ${redis.url}
    timeout: 10s
    on_outage: ${onOutage}
${OPEN_ROUTE}`,
    );
  const g = await startTestGatehouse(yaml("local"));
  t.teardown(() => g.close());
  const isRedis = (l: Line) => typeof l.msg === "string" && l.msg.startsWith("redis ");

  const connected = await g.logged(isRedis);
  t.match(connected, {
    level: "info",
    msg: "redis connected; limits are shared",
    redis: redis.url,
  });

  await redis.kill();
  const down = await g.logged((l) => isRedis(l) && l.level === "warn");
  t.equal(
    down.msg,
    "redis does not answer; on_outage is local: counting in this process until Redis answers",
  );
  t.equal(down.onOutage, "local");
  t.match(down.err, { type: String, message: String }, "why, as the error says it");
  t.not((down.err as Line).type, "Object", "the error's own type");

  await redis.restart();
  const back = await g.logged((l) => isRedis(l) && l !== connected && l.level === "info");
  t.equal(back.msg, "redis answers again; limits are shared again");

  // A reload that changes only on_outage keeps the connection; the next outage names the new one.
  await g.writeConfig(yaml("closed"));
  t.equal(await g.gatehouse.reload("test"), "success");
  await redis.kill();
  const closed = await g.logged((l) => isRedis(l) && l.level === "warn" && l !== down);
  t.equal(
    closed.msg,
    "redis does not answer; on_outage is closed: answering 503 limits_unavailable and not ready until Redis answers",
  );
  t.equal(closed.onOutage, "closed");
  t.equal(
    g.logs.filter((l) => l.msg === "redis connected; limits are shared").length,
    1,
    "connected once; every later answer is a return",
  );
});

const BEFORE = `plans:
  standard:
    rate_limits:
      burst: { limit: 5, window: 1s }
  premium:
    rate_limit: { limit: 50, window: 1s }
clients:
  - id: alpha
    secret_env: GATEHOUSE_TEST_ALPHA_SECRET
    plan: standard
  - id: beta
    secret_env: GATEHOUSE_TEST_BETA_SECRET
    plan: premium
routes:
  - path: /a
    methods: [GET]
  - path: /b
    methods: [GET]
`;

const AFTER = `plans:
  standard:
    rate_limits:
      burst: { limit: 6, window: 1s }
      sustained: { limit: 100, window: 1h }
  gold:
    rate_limit: { limit: 500, window: 1s }
clients:
  - id: alpha
    secret_env: GATEHOUSE_TEST_ALPHA_SECRET
    plan: standard
  - id: gamma
    secret_env: GATEHOUSE_TEST_BETA_SECRET
    plan: gold
routes:
  - path: /b
    methods: [GET, POST]
  - path: /c
    methods: [GET]
`;

t.test("a reload names the sections, plans, limits, routes and clients it changed", async (t) => {
  const alpha = "alpha-secret-that-must-never-be-logged";
  const beta = "beta-secret-that-must-never-be-logged";
  const env = {
    ...process.env,
    GATEHOUSE_TEST_ALPHA_SECRET: alpha,
    GATEHOUSE_TEST_BETA_SECRET: beta,
  };
  const g = await startTestGatehouse(configFor("http://127.0.0.1:3000", BEFORE), { env });
  t.teardown(() => g.close());
  await g.writeConfig(configFor("http://127.0.0.1:3000", AFTER).replace("2s", "3s"));
  t.equal(await g.gatehouse.reload("test"), "success");
  const line = await g.logged((l) => l.msg === "config reloaded");
  t.strictSame(line.changed, {
    sections: ["upstream", "clients", "plans", "routes"],
    plans: { added: ["gold"], removed: ["premium"], changed: ["standard"] },
    limits: { added: ["standard.sustained"], changed: ["standard.burst"] },
    routes: { added: ["/c"], removed: ["/a"], changed: ["/b"] },
    clients: { added: ["gamma"], removed: ["beta"] },
  });
  t.equal(line.hash, g.gatehouse.config().hash);
  const text = JSON.stringify(g.logs);
  t.notOk(text.includes(alpha) || text.includes(beta), "no secret in any line");
});

t.test("a reload that changes many routes names twenty of each and counts them all", async (t) => {
  const routes = (prefix: string, n: number) =>
    `routes:\n${Array.from({ length: n }, (_, i) => `  - path: /${prefix}${i}\n    methods: [GET]\n`).join("")}`;
  const g = await startTestGatehouse(configFor("http://127.0.0.1:3000", routes("a", 30)));
  t.teardown(() => g.close());
  await g.writeConfig(configFor("http://127.0.0.1:3000", routes("b", 25)));
  t.equal(await g.gatehouse.reload("test"), "success");
  const line = await g.logged((l) => l.msg === "config reloaded");
  t.strictSame(line.changed, {
    sections: ["routes"],
    routes: {
      added: Array.from({ length: 20 }, (_, i) => `/b${i}`),
      removed: Array.from({ length: 20 }, (_, i) => `/a${i}`),
      counts: { added: 25, removed: 30, changed: 0 },
    },
  });
});

t.test("a reload for a replaced key file names the file", async (t) => {
  const pem = () =>
    generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }) as string;
  const g = await startTestGatehouse(
    configFor("http://127.0.0.1:3000", "tokens:\n  signing:\n    key_file: signing.pem\n"),
    { files: { "signing.pem": pem() } },
  );
  t.teardown(() => g.close());
  await writeFile(join(g.dir, "signing.pem"), pem());
  t.equal(await g.gatehouse.reload("test"), "success");
  const line = await g.logged((l) => l.msg === "config reloaded");
  t.strictSame(line.changed, { sections: [], files: [join(g.dir, "signing.pem")] });
});

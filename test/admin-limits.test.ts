/**
 * The admin API's limits endpoints and `gatehouse limits`, through real sockets: read without
 * consuming, reset, addresses folded as the anonymous plan counts them, the admin token, and
 * (on a real Redis shared by two gatehouse instances) a reset that holds for every replica.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { metric } from "./helpers/metrics.js";
import { refusingPort } from "./helpers/ports.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const APP: TestClient = { id: "reporting-app", secret: "a-long-secret-for-the-admin-tests" };
const CLI = "dist/src/cli.js";

async function config(extra = "", store = ""): Promise<string> {
  return configFor(
    upstream.url,
    `${(await clientsYaml([APP])).replace("  - id: reporting-app\n", "  - id: reporting-app\n    plan: standard\n")}plans:
  standard:
    rate_limits:
      burst: { limit: 2, window: 1h }
      sustained: { limit: 10, window: 1d }
    quota: { limit: 100, period: month }
  anonymous:
    rate_limit: { limit: 2, window: 1h }
routes:
  - path: /v1/items
    methods: [GET]
  - path: /open
    methods: [GET]
    auth: none
${store}${extra}`,
  );
}

async function call(
  g: TestGatehouse,
  path: string,
  method = "GET",
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> | undefined }> {
  const response = await fetch(`${g.adminUrl}${path}`, { method, headers });
  const text = await response.text();
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) };
}

async function items(g: TestGatehouse, token: string): Promise<number> {
  const response = await fetch(`${g.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await response.arrayBuffer();
  return response.status;
}

function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, ...env } },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : Number(error.code), stdout, stderr }),
    );
  });
}

t.test("read without consuming, in the plan's order; a refusal counted in no limit", async (t) => {
  // A still clock: the resets a read reports count down with it.
  const now = Date.now();
  const g = await startTestGatehouse(await config(), { now: () => now });
  t.teardown(() => g.close());
  const token = await obtainToken(g.url, APP);
  t.strictSame(
    [await items(g, token), await items(g, token), await items(g, token)],
    [200, 200, 429],
  );
  const read = await call(g, "/limits/clients/reporting-app");
  t.equal(read.status, 200);
  t.match(read.body, { client: "reporting-app", plan: "standard" });
  t.strictSame(
    (read.body?.limits as Array<Record<string, unknown>>).map((l) => [
      l.name,
      l.kind,
      l.limit,
      l.remaining,
      l.window,
    ]),
    [
      ["burst", "rate", 2, 0, "1h"],
      ["sustained", "rate", 10, 8, "1d"],
      ["quota", "quota", 100, 98, "month"],
    ],
    "the burst's 429 took nothing from the sustained limit or the quota",
  );
  t.strictSame(
    (await call(g, "/limits/clients/reporting-app")).body,
    read.body,
    "reading consumed nothing",
  );

  const reset = await call(g, "/limits/clients/reporting-app", "DELETE");
  t.equal(reset.status, 204);
  t.equal(await items(g, token), 200, "served again after the reset");
  const after = await call(g, "/limits/clients/reporting-app");
  t.strictSame(
    (after.body?.limits as Array<Record<string, unknown>>).map((l) => l.remaining),
    [1, 9, 99],
  );

  t.match(await call(g, "/limits/clients/nobody"), { status: 404, body: { error: "not_found" } });
  t.match(await call(g, "/limits/clients/reporting-app", "POST"), { status: 405 });
});

t.test("addresses are folded as the anonymous plan counts them", async (t) => {
  const g = await startTestGatehouse(await config());
  t.teardown(() => g.close());
  for (let i = 0; i < 3; i++) await (await fetch(`${g.url}/open`)).arrayBuffer();
  const read = await call(g, "/limits/addresses/%3A%3Affff%3A127.0.0.1");
  t.match(read, { status: 200, body: { address: "127.0.0.1", plan: "anonymous" } });
  t.match(read.body?.limits, [{ name: "default", kind: "rate", limit: 2, remaining: 0 }]);
  t.match(await call(g, "/limits/addresses/2001:db8:1:2::7"), {
    body: { address: "2001:db8:1:2::/64" },
  });
  t.match(await call(g, "/limits/addresses/not-an-ip"), {
    status: 400,
    body: { error: "invalid_request" },
  });
  t.equal((await call(g, "/limits/addresses/127.0.0.1", "DELETE")).status, 204);
  t.equal((await fetch(`${g.url}/open`)).status, 200);
});

t.test("the admin token: refused without it, allowed with it; /metrics needs none", async (t) => {
  const adminToken = randomBytes(16).toString("hex");
  const g = await startTestGatehouse(await config("admin_token_env: GATEHOUSE_TEST_ADMIN\n"), {
    env: { ...process.env, GATEHOUSE_TEST_ADMIN: adminToken },
  });
  t.teardown(() => g.close());
  const missing = await call(g, "/limits/clients/reporting-app");
  t.match(missing, { status: 401, body: { error: "unauthorized" } });
  t.match(
    await call(g, "/limits/clients/reporting-app", "GET", { authorization: "Bearer wrong" }),
    {
      status: 401,
    },
  );
  t.equal(
    (
      await call(g, "/limits/clients/reporting-app", "GET", {
        authorization: `Bearer ${adminToken}`,
      })
    ).status,
    200,
  );
  t.equal((await fetch(`${g.adminUrl}/metrics`)).status, 200, "Prometheus scrapes without a token");
  const refused = await cli(["limits", "show", "reporting-app", "--admin", g.adminUrl]);
  t.equal(refused.code, 1, "the CLI without the token fails");
  t.equal(
    refused.stderr,
    "gatehouse limits: 401 unauthorized: the admin API needs its bearer token\n" +
      "set $GATEHOUSE_ADMIN_TOKEN to the admin token (the value of the variable admin_token_env names)\n",
  );
  const wrong = await cli(["limits", "show", "reporting-app", "--admin", g.adminUrl], {
    GATEHOUSE_ADMIN_TOKEN: "wrong",
  });
  t.equal(wrong.code, 1);
  t.match(wrong.stderr, /\n\$GATEHOUSE_ADMIN_TOKEN is not the admin token: /);
  const allowed = await cli(["limits", "reset", "reporting-app", "--admin", g.adminUrl], {
    GATEHOUSE_ADMIN_TOKEN: adminToken,
  });
  t.equal(allowed.code, 0, "with $GATEHOUSE_ADMIN_TOKEN it resets");
});

t.test("a non-loopback admin listener without a token refuses reads and resets", async (t) => {
  const g = await startTestGatehouse(await config(), { adminListen: { host: "0.0.0.0", port: 0 } });
  t.teardown(() => g.close());
  t.match(await call(g, "/limits/clients/reporting-app"), {
    status: 403,
    body: { error: "admin_token_required" },
  });
  t.match(await call(g, "/limits/clients/reporting-app", "DELETE"), {
    status: 403,
    body: { error: "admin_token_required" },
  });
  const reset = await cli(["limits", "reset", "reporting-app", "--admin", g.adminUrl]);
  t.equal(reset.code, 1);
  t.match(
    reset.stderr,
    /^gatehouse limits: 403 admin_token_required: .*\nadmin_listen is reachable from other machines, so resets need an admin token: set admin_token_env in the config, then \$GATEHOUSE_ADMIN_TOKEN here\n$/,
  );
});

t.test("admin_token_env naming an unset variable is a config error", async (t) => {
  const env = { ...process.env };
  delete env.GATEHOUSE_TEST_UNSET;
  await t.rejects(
    startTestGatehouse(await config("admin_token_env: GATEHOUSE_TEST_UNSET\n"), { env }),
    /admin_token_env: names GATEHOUSE_TEST_UNSET, which is not set/,
  );
});

t.test("gatehouse limits show and reset against a running gatehouse", async (t) => {
  const g = await startTestGatehouse(await config());
  t.teardown(() => g.close());
  const token = await obtainToken(g.url, APP);
  await items(g, token);
  const shown = await cli(["limits", "show", "reporting-app", "--admin", g.adminUrl]);
  t.equal(shown.code, 0);
  t.match(shown.stdout, /^client reporting-app {2}plan standard\n/);
  t.match(shown.stdout, /^NAME\s+KIND\s+LIMIT\s+REMAINING\s+RESET\s+WINDOW$/m);
  t.match(shown.stdout, /^burst\s+rate\s+2\s+1\s+\d+s\s+1h$/m);
  t.match(shown.stdout, /^quota\s+quota\s+100\s+99\s+\d+s\s+month$/m);
  const json = await cli(["limits", "show", "reporting-app", "--json", "--admin", g.adminUrl]);
  t.match(JSON.parse(json.stdout), {
    client: "reporting-app",
    limits: [{ name: "burst" }, {}, {}],
  });
  const address = await cli(["limits", "show", "127.0.0.1", "--address"], {
    GATEHOUSE_ADMIN_URL: g.adminUrl,
  });
  t.match(address.stdout, /^address 127\.0\.0\.1 {2}plan anonymous$/m);
  const reset = await cli(["limits", "reset", "reporting-app", "--admin", g.adminUrl]);
  t.equal(reset.code, 0);
  t.match(reset.stdout, /reset the counters of client reporting-app/);
  const unknown = await cli(["limits", "show", "nobody", "--admin", g.adminUrl]);
  t.equal(unknown.code, 1, "an unknown client fails");
  t.match(unknown.stderr, /404 not_found/);
  const help = await cli(["help", "limits"]);
  const noId = await cli(["limits", "show"]);
  t.equal(noId.code, 2, "usage");
  t.equal(
    noId.stderr,
    `gatehouse: limits show needs a client id, or an address with --address\n${help.stdout}`,
  );
  const frob = await cli(["limits", "frob", "x"]);
  t.equal(frob.code, 2, "usage");
  t.equal(
    frob.stderr,
    `gatehouse: limits takes show or reset, then a client id or an address\n${help.stdout}`,
  );
  const port = await refusingPort();
  const closed = await cli(["limits", "show", "x", "--admin", `http://127.0.0.1:${port}`]);
  t.equal(closed.code, 1, "the admin API unreachable");
  t.equal(
    closed.stderr,
    `gatehouse limits: cannot reach the admin API at http://127.0.0.1:${port} (ECONNREFUSED); point to it with --admin HOST:PORT, --config FILE or $GATEHOUSE_ADMIN_URL\n`,
  );
});

t.test("gatehouse limits --config finds admin_listen and the admin token", async (t) => {
  const adminToken = randomBytes(16).toString("hex");
  const g = await startTestGatehouse(await config("admin_token_env: GATEHOUSE_TEST_ADMIN\n"), {
    env: { ...process.env, GATEHOUSE_TEST_ADMIN: adminToken },
    adminListen: { host: "0.0.0.0", port: 0 },
  });
  t.teardown(() => g.close());
  const port = g.gatehouse.adminAddress.port;
  // The file the CLI is given: the listener on every interface, which it reaches on loopback.
  const file = join(g.dir, "cli.config.yaml");
  await writeFile(
    file,
    await config(`admin_listen: 0.0.0.0:${port}\nadmin_token_env: GATEHOUSE_TEST_ADMIN\n`),
  );
  const unset = { GATEHOUSE_ADMIN_TOKEN: "", GATEHOUSE_ADMIN_URL: "" };
  const found = await cli(["limits", "show", "reporting-app", "--config", file], {
    ...unset,
    GATEHOUSE_TEST_ADMIN: adminToken,
  });
  t.equal(found.stderr, "");
  t.match(found.stdout, /^client reporting-app {2}plan standard\n/);
  t.equal(found.code, 0, "the address and the token's variable come from the file");
  const short = await cli(["limits", "show", "reporting-app", "-c", file], unset);
  t.equal(short.code, 1);
  t.equal(
    short.stderr,
    "gatehouse limits: 401 unauthorized: the admin API needs its bearer token\n" +
      "set $GATEHOUSE_TEST_ADMIN, which admin_token_env names in the config, to the admin token (or set $GATEHOUSE_ADMIN_TOKEN)\n",
  );
  const explicit = await cli(["limits", "show", "reporting-app", "--config", file], {
    ...unset,
    GATEHOUSE_TEST_ADMIN: adminToken,
    GATEHOUSE_ADMIN_TOKEN: "wrong",
  });
  t.equal(explicit.code, 1, "$GATEHOUSE_ADMIN_TOKEN wins over the file's variable");
  t.match(explicit.stderr, /\n\$GATEHOUSE_ADMIN_TOKEN is not the admin token: /);
  const elsewhere = await refusingPort();
  const admin = await cli(
    ["limits", "show", "reporting-app", "--config", file, "--admin", `127.0.0.1:${elsewhere}`],
    { ...unset, GATEHOUSE_TEST_ADMIN: adminToken },
  );
  t.equal(admin.code, 1, "--admin wins over the file's admin_listen");
  t.match(admin.stderr, `at http://127.0.0.1:${elsewhere} (ECONNREFUSED); point to it with`);
  const viaEnv = await cli(["limits", "reset", "reporting-app", "--config", file], {
    GATEHOUSE_ADMIN_URL: `127.0.0.1:${elsewhere}`,
    GATEHOUSE_ADMIN_TOKEN: adminToken,
  });
  t.equal(viaEnv.code, 0, "the file wins over $GATEHOUSE_ADMIN_URL");
  const missing = await cli(["limits", "show", "x", "--config", join(g.dir, "nothing.yaml")]);
  t.equal(missing.code, 1);
  t.equal(missing.stderr, `${join(g.dir, "nothing.yaml")}:1:1 cannot be read (ENOENT)\n`);
  await writeFile(file, await config("admin_listen: 127.0.0.1:0\n"));
  const chosen = await cli(["limits", "show", "x", "--config", file]);
  t.equal(chosen.code, 1);
  t.equal(
    chosen.stderr,
    `gatehouse limits: admin_listen in ${file} has port 0, chosen at start: name the listener with --admin HOST:PORT\n`,
  );
  await writeFile(file, await config("admin_listen: 127.0.0.1\n"));
  const invalid = await cli(["limits", "show", "x", "--config", file]);
  t.equal(invalid.code, 1, "a file gatehouse would refuse is refused");
  t.match(invalid.stderr, /^.*cli\.config\.yaml:\d+:15 admin_listen: must be HOST:PORT/);
});

t.test("--admin takes HOST:PORT without a scheme, IPv6 in brackets", async (t) => {
  const g = await startTestGatehouse(await config());
  t.teardown(() => g.close());
  const port = g.gatehouse.adminAddress.port;
  const shown = await cli(["limits", "show", "reporting-app", "--admin", `127.0.0.1:${port}`]);
  t.equal(shown.code, 0);
  t.match(shown.stdout, /^client reporting-app {2}plan standard\n/);
  for (const wrong of ["ftp://127.0.0.1:9901", "127.0.0.1:99999", "[::1"]) {
    const refused = await cli(["limits", "show", "x", "--admin", wrong]);
    t.equal(refused.code, 2, wrong);
    t.equal(
      refused.stderr,
      `gatehouse limits: --admin ${JSON.stringify(wrong)} is neither HOST:PORT nor an http(s) URL, such as 127.0.0.1:9901\n`,
    );
  }
  const unavailable = await ipv6Unavailable();
  if (unavailable !== false) {
    t.comment(`IPv6 not tested: ${unavailable}`);
    return;
  }
  const v6 = await startTestGatehouse(await config(), { adminListen: { host: "::1", port: 0 } });
  t.teardown(() => v6.close());
  const v6Port = v6.gatehouse.adminAddress.port;
  const bracketed = await cli(["limits", "show", "reporting-app", "--admin", `[::1]:${v6Port}`]);
  t.equal(bracketed.code, 0, "[::1]:PORT");
  const file = join(v6.dir, "cli.config.yaml");
  await writeFile(file, await config(`admin_listen: "[::]:${v6Port}"\n`));
  const wildcard = await cli(["limits", "show", "reporting-app", "--config", file]);
  t.equal(wildcard.code, 0, "admin_listen [::] is reached on ::1");
});

// Why an IPv6 loopback listener cannot be had here, or false when it can.
async function ipv6Unavailable(): Promise<string | false> {
  const server = createServer();
  try {
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(0, "::1", done);
    });
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  } finally {
    server.close();
  }
}

async function withRedis(t: Test): Promise<string> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  return redis.url;
}

t.test("on a Redis shared by two gatehouses, a reset holds for every replica", async (t) => {
  const url = await withRedis(t);
  const store = `limits:\n  store: redis\n  redis:\n    url: ${url}\n    key_prefix: "gh-${randomBytes(4).toString("hex")}:"\n    timeout: 10s\n`;
  // Replicas accept each other's tokens only through one shared signing key.
  const signing =
    "tokens:\n  signing:\n    algorithm: HS256\n    secret_env: GATEHOUSE_TEST_HS256\n";
  const yaml = await config(signing, store);
  const env = { ...process.env, GATEHOUSE_TEST_HS256: randomBytes(32).toString("hex") };
  const a = await startTestGatehouse(yaml, { env });
  t.teardown(() => a.close());
  const b = await startTestGatehouse(yaml, { env });
  t.teardown(() => b.close());
  for (const g of [a, b]) {
    t.ok(await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 1));
  }
  const token = await obtainToken(a.url, APP);
  t.strictSame([await items(a, token), await items(b, token)], [200, 200]);
  t.equal(await items(b, token), 429, "b is refused by Redis");
  t.equal(await items(b, token), 429, "and then by its own record");
  const read = await call(a, "/limits/clients/reporting-app");
  t.match(
    read.body?.limits,
    [{ name: "burst", remaining: 0 }, { remaining: 8 }, { remaining: 98 }],
    "a reads what both counted",
  );
  t.equal((await call(a, "/limits/clients/reporting-app", "DELETE")).status, 204);
  t.ok(
    await eventually(async () => (await items(b, token)) === 200),
    "b serves again: the reset reached its record of refusals",
  );
});

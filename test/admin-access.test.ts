/**
 * Who may use the admin API, through real sockets: observability endpoints (/metrics, /version)
 * open to anyone who reaches the listener; operator endpoints (/config, /limits) behind the admin
 * token, and closed on a non-loopback listener that has none; the warning such a start logs once;
 * and the log line every reset leaves.
 */
import { randomBytes } from "node:crypto";
import t from "tap";
import { json, send } from "./helpers/client.js";
import {
  anonymousOpenRoute,
  configFor,
  startTestGatehouse,
  type TestGatehouse,
} from "./helpers/gatehouse.js";
import { clientsYaml } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const yaml = configFor(
  upstream.url,
  `${(await clientsYaml([{ id: "reporting-app", secret: "a-long-secret-for-the-access-tests" }])).replace("  - id: reporting-app\n", "  - id: reporting-app\n    plan: standard\n")}plans:
  standard:
    rate_limit: { limit: 5, window: 1h }
${anonymousOpenRoute(5)}`,
);

const OPERATOR: ReadonlyArray<readonly [string, string]> = [
  ["GET", "/config"],
  ["GET", "/limits/clients/reporting-app"],
  ["GET", "/limits/addresses/127.0.0.1"],
  ["DELETE", "/limits/clients/reporting-app"],
  ["DELETE", "/limits/addresses/127.0.0.1"],
];

async function status(g: TestGatehouse, method: string, path: string, token?: string) {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const answer = await send(`${g.adminUrl}${path}`, { method, headers });
  const isJson = /^application\/json/.test(answer.headers["content-type"] ?? "");
  return { status: answer.status, error: isJson ? json(answer).error : undefined };
}

const unguarded = (g: TestGatehouse) =>
  g.logs.filter((line) => line.level === "warn" && /admin_token_env/.test(String(line.msg)));

t.test("a listener on every interface without a token: operator endpoints 403", async (t) => {
  const g = await startTestGatehouse(yaml, { adminListen: { host: "0.0.0.0", port: 0 } });
  t.teardown(() => g.close());
  await fetch(`${g.url}/open`);
  for (const [method, path] of OPERATOR) {
    t.strictSame(
      await status(g, method, path),
      { status: 403, error: "admin_token_required" },
      `${method} ${path}, through 127.0.0.1`,
    );
  }
  t.equal((await status(g, "GET", "/metrics")).status, 200, "Prometheus still scrapes");
  t.equal((await status(g, "GET", "/version")).status, 200);
  const warnings = unguarded(g);
  t.equal(warnings.length, 1, "one warning at start, none per request");
  t.match(warnings[0], { adminListen: "0.0.0.0" });
});

t.test("a loopback listener without a token serves operators and warns of nothing", async (t) => {
  const g = await startTestGatehouse(yaml);
  t.teardown(() => g.close());
  for (const [method, path] of OPERATOR) {
    t.equal((await status(g, method, path)).status, method === "GET" ? 200 : 204, path);
  }
  t.strictSame(unguarded(g), []);
});

t.test("with admin_token_env: operator endpoints need the token, the others never", async (t) => {
  const token = randomBytes(32).toString("hex");
  const g = await startTestGatehouse(`${yaml}admin_token_env: GATEHOUSE_TEST_ADMIN_TOKEN\n`, {
    adminListen: { host: "0.0.0.0", port: 0 },
    env: { ...process.env, GATEHOUSE_TEST_ADMIN_TOKEN: token },
  });
  t.teardown(() => g.close());
  for (const [method, path] of OPERATOR) {
    t.strictSame(await status(g, method, path), { status: 401, error: "unauthorized" }, path);
    t.equal((await status(g, method, path, `${token}0`)).status, 401, `${path}, a wrong token`);
    t.equal((await status(g, method, path, token)).status, method === "GET" ? 200 : 204, path);
  }
  t.equal((await status(g, "GET", "/version")).status, 200, "/version without the token");
  t.equal((await status(g, "GET", "/metrics")).status, 200, "/metrics without the token");
  t.strictSame(unguarded(g), [], "no warning: the token guards the listener");
});

t.test("every reset is logged at info: what was reset, its plan, the caller", async (t) => {
  const g = await startTestGatehouse(yaml);
  t.teardown(() => g.close());
  t.equal((await status(g, "DELETE", "/limits/clients/reporting-app")).status, 204);
  t.equal((await status(g, "DELETE", "/limits/addresses/::ffff:127.0.0.1")).status, 204);
  t.equal((await status(g, "DELETE", "/limits/clients/nobody")).status, 404);
  const resets = g.logs.filter((line) => line.msg === "admin reset limits");
  t.equal(resets.length, 2, "a refused reset resets nothing and logs no reset");
  t.match(resets[0], { level: "info", client: "reporting-app", plan: "standard" });
  t.match(resets[1], { level: "info", address: "127.0.0.1", plan: "anonymous" });
  for (const line of resets) t.equal(line.caller, "127.0.0.1");
});

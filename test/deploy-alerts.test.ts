/**
 * The alerting rules in deploy/prometheus, read by Prometheus's own promtool: `check rules` on the
 * rules, `test rules` on their unit tests (gatehouse-alerts.test.yaml, where each alert fires on
 * the series it watches and stays quiet where it should), and the series they count from as a
 * real gatehouse exports them.
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import t from "tap";
import { parse } from "yaml";
import { refusalReason } from "../src/tokens/refusal-reasons.js";
import { ensureDebianPackage } from "./helpers/debian.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { startUpstream } from "./helpers/upstream.js";

// On a fresh machine promtool is installed first, which may take minutes.
t.setTimeout(300_000);
const promtool = ensureDebianPackage("promtool", "prometheus");

const RULES = "deploy/prometheus/gatehouse-alerts.yaml";
const TESTS = "deploy/prometheus/gatehouse-alerts.test.yaml";

interface Rules {
  groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
}
interface RuleTests {
  rule_files: string[];
  tests: Array<{
    alert_rule_test: Array<{
      alertname: string;
      exp_alerts: Array<{ exp_annotations?: Record<string, string> }>;
    }>;
  }>;
}

const rulesText = await readFile(RULES, "utf8");
const alerts = (parse(rulesText) as Rules).groups.flatMap((g) => g.rules);
const testsText = await readFile(TESTS, "utf8");
const cases = (parse(testsText) as RuleTests).tests.flatMap((c) => c.alert_rule_test);

function run(...args: string[]) {
  return spawnSync(promtool, args, { encoding: "utf8" });
}

t.test("promtool finds every rule valid", async (t) => {
  const checked = run("check", "rules", RULES);
  t.equal(checked.status, 0, checked.stderr);
  t.match(checked.stdout, `SUCCESS: ${alerts.length} rules found`);
});

t.test("the alerts' unit tests pass", async (t) => {
  const tested = run("test", "rules", TESTS);
  t.equal(tested.status, 0, `${tested.stdout}${tested.stderr}`);
  t.match(tested.stdout, /SUCCESS/);
});

t.test("every alert is tested firing, and quiet", async (t) => {
  t.ok(alerts.length >= 9, `${alerts.length} alerts`);
  for (const { alert } of alerts) {
    const own = cases.filter((c) => c.alertname === alert);
    t.ok(
      own.some((c) => c.exp_alerts.length > 0),
      `${alert} fires in a test`,
    );
    t.ok(
      own.some((c) => c.exp_alerts.length === 0),
      `${alert} is quiet in one`,
    );
  }
});

// The tests hold the rules to what they expect: an expectation the rules do not meet fails.
t.test("a test expecting another annotation fails, naming its alert", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-alerts-"));
  const tests = parse(testsText) as RuleTests;
  tests.rule_files = [resolve(RULES)];
  const firing = tests.tests
    .flatMap((c) => c.alert_rule_test)
    .find((c) => c.alertname === "GatehouseConfigHashesDiffer" && c.exp_alerts.length > 0);
  const expected = firing?.exp_alerts[0]?.exp_annotations as Record<string, string>;
  expected.summary = expected.summary?.replace("2 different", "3 different") ?? "";
  const path = join(dir, "changed.test.yaml");
  await writeFile(path, JSON.stringify(tests));
  const tested = run("test", "rules", path);
  t.equal(tested.status, 1);
  t.match(
    `${tested.stdout}${tested.stderr}`,
    /FAILED:[\s\S]*alertname: GatehouseConfigHashesDiffer/,
  );
});

t.test(
  "the lockout alert counts the reasons the failure limit's 429s are counted by",
  async (t) => {
    const lockouts = alerts.find((a) => a.alert === "GatehouseFailureLimitLockouts");
    // At the token endpoint and on bearer routes (src/tokens/authenticate-client.ts and
    // src/stages/authenticate.ts count them in gatehouse_auth_failures_total).
    const reasons = ["rate_limited", refusalReason("rate_limited")];
    t.match(lockouts?.expr, `gatehouse_auth_failures_total{reason=~"${reasons.join("|")}"}`);
  },
);

// A series that first appears at 1 shows Prometheus no increase: the failed-reload alert would miss
// the first failure of a process.
t.test("a fresh gatehouse exports its failed reloads at 0", async (t) => {
  const upstream = await startUpstream();
  const g = await startTestGatehouse(configFor(upstream.url));
  t.teardown(async () => {
    await g.close();
    await upstream.close();
  });
  const failed = sampleValue(await scrape(g), "gatehouse_config_reloads_total", {
    result: "failure",
  });
  t.equal(failed, 0);
});

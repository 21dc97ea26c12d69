/**
 * The Grafana dashboard and the Prometheus alerting rules in deploy/: importable, every expression
 * valid PromQL (read by Prometheus's own grammar, @prometheus-io/lezer-promql), and every metric
 * they name served by a real gatehouse's /metrics (one counting in Redis, so that the Redis
 * gauge is there too).
 */
import { readFile } from "node:fs/promises";
import { parser } from "@prometheus-io/lezer-promql";
import t from "tap";
import { parse } from "yaml";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { scrape } from "./helpers/metrics.js";
import { startTestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: Array<{ expr: string }>;
}
interface Dashboard {
  templating: {
    list: Array<{ name: string; type: string; query: unknown; datasource?: { uid?: string } }>;
  };
  panels: Panel[];
}
interface Rules {
  groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string }> }>;
}

const dashboard = JSON.parse(
  await readFile("deploy/grafana/gatehouse-dashboard.json", "utf8"),
) as Dashboard;
const rules = parse(await readFile("deploy/prometheus/gatehouse-alerts.yaml", "utf8")) as Rules;

// Grafana's variables, replaced by what Grafana would put there before Prometheus reads it.
function expand(expr: string): string {
  return expr.replaceAll("$__rate_interval", "5m").replaceAll("$job", ".*");
}

/** The metric names an expression selects, or the parse errors' positions. */
function metricNames(expr: string): { names: string[]; errors: number[] } {
  const names: string[] = [];
  const errors: number[] = [];
  const cursor = parser.parse(expr).cursor();
  do {
    if (cursor.type.isError) errors.push(cursor.from);
    if (cursor.name === "Identifier" && cursor.node.parent?.name === "VectorSelector") {
      names.push(expr.slice(cursor.from, cursor.to));
    }
  } while (cursor.next());
  return { names, errors };
}

const panelExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((q) => expand(q.expr)));
const ruleExprs = rules.groups.flatMap((g) => g.rules.map((r) => r.expr));

// Every `datasource` reference anywhere below `node`, with where it is.
function datasourceRefs(node: unknown, at: string): Array<[string, unknown]> {
  if (Array.isArray(node)) return node.flatMap((child, i) => datasourceRefs(child, `${at}[${i}]`));
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([key, child]): Array<[string, unknown]> =>
    key === "datasource"
      ? [[`${at}.${key}`, child], ...datasourceRefs(child, `${at}.${key}`)]
      : datasourceRefs(child, `${at}.${key}`),
  );
}

t.test("every panel queries the data source its variable declares", async (t) => {
  const declared = dashboard.templating.list.filter((v) => v.type === "datasource");
  t.equal(declared.length, 1, "one data-source variable");
  t.equal(declared[0]?.query, "prometheus", "of Prometheus data sources");
  const variable = `\${${declared[0]?.name ?? ""}}`;
  const refs = [
    ...datasourceRefs(dashboard.panels, "panels"),
    ...datasourceRefs(
      dashboard.templating.list.filter((v) => v.type !== "datasource"),
      "templating",
    ),
  ];
  t.ok(refs.length > dashboard.panels.length, "panels, their queries and the job variable");
  for (const [where, ref] of refs) {
    t.strictSame(ref, { type: "prometheus", uid: variable }, where);
  }
  for (const panel of dashboard.panels.filter((p) => p.type !== "row")) {
    t.ok((panel.targets ?? []).length > 0, `${panel.title} has a query`);
  }
  const titles = dashboard.panels.map((p) => p.title).join("\n");
  for (const topic of [
    /Requests/,
    /latency/i,
    /Refusals by plan and limit/,
    /Authentication failures/,
    /Redis round trips/,
    /Redis answering/,
    /5xx/,
  ]) {
    t.match(titles, topic);
  }
});

t.test("the rules alert on a Redis outage, refusals, upstream 5xx and p99 latency", async (t) => {
  const byName = new Map(rules.groups.flatMap((g) => g.rules.map((r) => [r.alert, r.expr])));
  t.match(byName.get("GatehouseRedisDown"), /gatehouse_limiter_store_up/);
  t.match(byName.get("GatehouseRefusalRatioHigh"), /rate_limited\|quota_exceeded/);
  t.match(byName.get("GatehouseUpstream5xxRatioHigh"), /status=~"5\.\."/);
  t.match(byName.get("GatehouseLatencyP99High"), /histogram_quantile\(0\.99,/);
});

t.test("every expression is valid PromQL", async (t) => {
  for (const expr of [...panelExprs, ...ruleExprs]) {
    t.strictSame(metricNames(expr).errors, [], expr);
  }
  // The grammar does find errors.
  t.not(metricNames("sum(rate(gatehouse_requests_total[5m])").errors.length, 0);
});

t.test("every metric they use is on a real gatehouse's /metrics", async (t) => {
  const redis = await startTestRedis();
  const upstream = await startUpstream();
  const g = await startTestGatehouse(
    configFor(upstream.url, `limits:\n  store: redis\n  redis:\n    url: ${redis.url}\n`),
  );
  t.teardown(async () => {
    await g.close();
    await upstream.close();
    await redis.close();
  });
  const types = new Map<string, string>();
  for (const [, name, type] of (await scrape(g)).matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    types.set(name as string, type as string);
  }
  // A histogram's series are its name with _bucket, _sum or _count.
  const served = (name: string): boolean => {
    if (types.has(name)) return true;
    const base = name.replace(/_(bucket|sum|count)$/, "");
    return base !== name && types.get(base) === "histogram";
  };
  const used = new Set([...panelExprs, ...ruleExprs].flatMap((e) => metricNames(e).names));
  t.ok(used.size >= 10, `${used.size} metrics used`);
  for (const name of used) t.ok(served(name), name);
});

/**
 * The per-request metrics: counted with plain arithmetic on the hot path and turned into
 * Prometheus samples only when /metrics is scraped. prom-client's labelled Counter and Histogram
 * hash and validate their labels and allocate on every call; measured on a forwarded request that
 * cost more than the route lookup, the canonicalisation and the header rewriting together.
 */
import type { Registry } from "prom-client";

type Labels = Record<string, string | number>;

interface Sample {
  readonly labels: Labels;
  readonly value: number;
  readonly metricName?: string;
}

/** What prom-client's Registry reads from a metric (its `get()` and `reset()`). */
interface CustomMetric {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "histogram";
  readonly aggregator: "sum";
  get(): { name: string; help: string; type: string; values: Sample[]; aggregator: "sum" };
  reset(): void;
}

/** One histogram series: per-bucket counts (not cumulative), their sum and count. */
class Series {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Labels,
    size: number,
  ) {
    this.counts = new Float64Array(size);
  }

  observe(bounds: readonly number[], value: number): void {
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    this.counts[i]++;
    this.sum += value;
    this.count++;
  }

  samples(name: string, bounds: readonly number[]): Sample[] {
    const samples: Sample[] = [];
    let cumulative = 0;
    bounds.forEach((bound, i) => {
      cumulative += this.counts[i];
      samples.push({
        metricName: `${name}_bucket`,
        labels: { ...this.labels, le: bound },
        value: cumulative,
      });
    });
    samples.push({
      metricName: `${name}_bucket`,
      labels: { ...this.labels, le: "+Inf" },
      value: this.count,
    });
    samples.push({ metricName: `${name}_sum`, labels: this.labels, value: this.sum });
    samples.push({ metricName: `${name}_count`, labels: this.labels, value: this.count });
    return samples;
  }
}

interface RouteStats {
  readonly duration: Series;
  /** Answers by status, then by decision. */
  readonly answers: Map<number, Map<string, { count: number }>>;
}

/** Records every answered request; registered in a prom-client Registry as three metrics. */
export class RequestMetrics {
  private readonly routes = new Map<string, RouteStats>();
  private upstream: Series;

  constructor(private readonly bounds: readonly number[]) {
    this.upstream = new Series({}, bounds.length + 1);
  }

  /** Counts one answered request and its duration in seconds. */
  request(route: string, status: number, decision: string, seconds: number): void {
    let stats = this.routes.get(route);
    if (stats === undefined) {
      stats = { duration: new Series({ route }, this.bounds.length + 1), answers: new Map() };
      this.routes.set(route, stats);
    }
    stats.duration.observe(this.bounds, seconds);
    let byDecision = stats.answers.get(status);
    if (byDecision === undefined) {
      byDecision = new Map();
      stats.answers.set(status, byDecision);
    }
    const entry = byDecision.get(decision);
    if (entry === undefined) byDecision.set(decision, { count: 1 });
    else entry.count++;
  }

  /** Records the time to an upstream's response headers, in seconds. */
  upstreamResponse(seconds: number): void {
    this.upstream.observe(this.bounds, seconds);
  }

  /** Registers the three metrics in `registry`. */
  register(registry: Registry): void {
    const metric = (
      name: string,
      help: string,
      type: "counter" | "histogram",
      values: () => Sample[],
      reset: () => void,
    ): CustomMetric => ({
      name,
      help,
      type,
      aggregator: "sum",
      get: () => ({ name, help, type, values: values(), aggregator: "sum" }),
      reset,
    });
    const clearRoutes = () => this.routes.clear();
    const metrics = [
      metric(
        "gatehouse_requests_total",
        "Requests answered, by route pattern, status and limit decision.",
        "counter",
        () =>
          [...this.routes].flatMap(([route, stats]) =>
            [...stats.answers].flatMap(([status, byDecision]) =>
              [...byDecision].map(([decision, { count }]) => ({
                labels: { route, status, decision },
                value: count,
              })),
            ),
          ),
        clearRoutes,
      ),
      metric(
        "gatehouse_request_duration_seconds",
        "Time from request arrival to the end of the response.",
        "histogram",
        () =>
          [...this.routes.values()].flatMap((stats) =>
            stats.duration.samples("gatehouse_request_duration_seconds", this.bounds),
          ),
        clearRoutes,
      ),
      metric(
        "gatehouse_upstream_duration_seconds",
        "Time from sending a request upstream to its response headers.",
        "histogram",
        () => this.upstream.samples("gatehouse_upstream_duration_seconds", this.bounds),
        () => (this.upstream = new Series({}, this.bounds.length + 1)),
      ),
    ];
    for (const m of metrics) registry.registerMetric(m as never);
  }
}

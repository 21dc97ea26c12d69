/** Reading `traceparent` (W3C Trace Context §3.2 and §4.3), trace ids, and ratio sampling. */
import { ROOT_CONTEXT } from "@opentelemetry/api";
import { SamplingDecision, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace";
import fc from "fast-check";
import t from "tap";
import {
  createTraceIds,
  formatTraceParent,
  parseTraceParent,
  ratioSampler,
} from "../src/http/trace-context.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";

t.test("valid values are continued", async (t) => {
  const cases: Array<[string, boolean]> = [
    [`00-${TRACE}-${PARENT}-01`, true],
    [`00-${TRACE}-${PARENT}-00`, false],
    // Only the lowest bit is the sampled flag; unknown bits are ignored.
    [`00-${TRACE}-${PARENT}-09`, true],
    [`00-${TRACE}-${PARENT}-fe`, false],
    // A later version: its first 55 characters in the 00 layout, then nothing or "-" and more.
    [`01-${TRACE}-${PARENT}-01`, true],
    [`cc-${TRACE}-${PARENT}-01-what-the-future-holds`, true],
  ];
  for (const [value, sampled] of cases) {
    t.strictSame(parseTraceParent(value), { traceId: TRACE, parentId: PARENT, sampled }, value);
  }
});

t.test("invalid values start a new trace", async (t) => {
  const invalid = [
    "",
    `00-${TRACE}-${PARENT}`,
    `00-${TRACE.toUpperCase()}-${PARENT}-01`,
    `00-${TRACE}-${PARENT.toUpperCase()}-01`,
    `00-${TRACE}-${PARENT}-0A`,
    `0A-${TRACE}-${PARENT}-01`,
    `ff-${TRACE}-${PARENT}-01`,
    `00-${"0".repeat(32)}-${PARENT}-01`,
    `00-${TRACE}-${"0".repeat(16)}-01`,
    `00-${TRACE}1-${PARENT}-01`,
    `00-${TRACE}-${PARENT}1-01`,
    `00-${TRACE.slice(1)}-${PARENT}-01`,
    // Version 00 is exactly 55 characters.
    `00-${TRACE}-${PARENT}-01-extra`,
    `00-${TRACE}-${PARENT}-01 `,
    // A later version must continue with "-" after the flags.
    `01-${TRACE}-${PARENT}-01x`,
    `00_${TRACE}-${PARENT}-01`,
    `00-${TRACE}_${PARENT}-01`,
    `00-${TRACE}-${PARENT}_01`,
    `00-${TRACE.slice(0, 31)}g-${PARENT}-01`,
    // Two header lines, as Node joins them.
    `00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01`,
    `01-${TRACE}-${PARENT}-01, 01-${TRACE}-${PARENT}-01`,
  ];
  for (const value of invalid) t.equal(parseTraceParent(value), undefined, JSON.stringify(value));
  t.equal(parseTraceParent(undefined), undefined);
});

const traceIds = fc.stringMatching(/^[0-9a-f]{32}$/).filter((id) => /[1-9a-f]/.test(id));
const spanIds = fc.stringMatching(/^[0-9a-f]{16}$/).filter((id) => /[1-9a-f]/.test(id));

t.test("what gatehouse forwards parses back to its own span", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(traceIds, spanIds, fc.boolean(), (traceId, spanId, sampled) => {
        const parsed = parseTraceParent(formatTraceParent(traceId, spanId, sampled));
        return (
          parsed?.traceId === traceId && parsed.parentId === spanId && parsed.sampled === sampled
        );
      }),
    ),
  );
});

t.test(
  "random ids are lower-case hex of the right length, never zero, never repeated",
  async (t) => {
    const ids = createTraceIds();
    const traces = new Set<string>();
    const spans = new Set<string>();
    // Several pool refills.
    for (let i = 0; i < 1000; i++) {
      traces.add(ids.traceId());
      spans.add(ids.spanId());
    }
    t.equal(traces.size, 1000);
    t.equal(spans.size, 1000);
    for (const id of traces) if (!/^[0-9a-f]{32}$/.test(id) || /^0+$/.test(id)) t.fail(id);
    for (const id of spans) if (!/^[0-9a-f]{16}$/.test(id) || /^0+$/.test(id)) t.fail(id);
  },
);

t.test("ratio sampling decides as OpenTelemetry's TraceIdRatioBased sampler does", async (t) => {
  const ratios = fc.oneof(
    fc.constantFrom(0, 1),
    fc.integer({ min: 0, max: 1000 }).map((n) => n / 1000),
    fc.double({ min: 0, max: 1, noNaN: true }),
  );
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(traceIds, ratios, (traceId, ratio) => {
        const sdk = new TraceIdRatioBasedSampler(ratio).shouldSample(ROOT_CONTEXT, traceId);
        return (
          ratioSampler(ratio)(traceId) === (sdk.decision === SamplingDecision.RECORD_AND_SAMPLED)
        );
      }),
      { numRuns: 5000 },
    ),
  );
  // About half of many random traces at 0.5: the decision follows the ratio.
  const ids = createTraceIds();
  const half = ratioSampler(0.5);
  let sampled = 0;
  for (let i = 0; i < 10_000; i++) if (half(ids.traceId())) sampled++;
  t.ok(sampled > 4000 && sampled < 6000, `${sampled} of 10000 sampled at 0.5`);
});

/**
 * The `tracing` section: where spans are exported over OTLP/HTTP, under which service name, and
 * which share of the traces that start here is sampled. Without an endpoint gatehouse still
 * reads and forwards W3C Trace Context and logs the ids; it exports nothing.
 */
import { z } from "zod";
import type { Ctx } from "./cross-checks.js";
import { checkHttpUrl } from "./schema-checks.js";
import { positiveDuration } from "./schema-fields.js";

// A base URL as OTEL_EXPORTER_OTLP_ENDPOINT is one: http or https, without credentials (headers
// such as an API key come from OTEL_EXPORTER_OTLP_HEADERS, never from the file).
function checkEndpoint(value: string, ctx: Ctx): void {
  if (value !== "") {
    checkHttpUrl(value, ctx, "http://otel-collector:4318", "; use OTEL_EXPORTER_OTLP_HEADERS");
  }
}

/** The `tracing` section, with its defaults. */
export const TracingSchema = z.strictObject({
  otlp_endpoint: z
    .string()
    .superRefine(checkEndpoint)
    .default("")
    .describe('OTLP/HTTP base URL (spans go to <otlp_endpoint>/v1/traces); "" exports nothing.'),
  service_name: z
    .string()
    .min(1, { error: "must not be empty" })
    .default("gatehouse")
    .describe("The service.name of the exported spans."),
  sample_ratio: z
    .number({ error: "must be a number from 0 to 1" })
    .min(0, { error: "must be a number from 0 to 1" })
    .max(1, { error: "must be a number from 0 to 1" })
    .default(1)
    .describe("Share of the traces starting here that are sampled; a caller's decision is kept."),
  timeout: positiveDuration(
    "One export's deadline, retries included; spans not sent by then are dropped.",
  ).default("10s"),
});

/** What the tracing of one config snapshot runs with. */
export interface TracingSettings {
  /** Where spans are posted (`<otlp_endpoint>/v1/traces`); undefined: nothing is exported. */
  readonly tracesUrl: string | undefined;
  readonly serviceName: string;
  /** Share of the traces starting here that are sampled, 0 to 1. */
  readonly sampleRatio: number;
  /** One export's deadline, retries included. */
  readonly timeoutMs: number;
}

/** The OTLP/HTTP traces URL under a base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT is read. */
export function tracesUrl(endpoint: string): string | undefined {
  if (endpoint === "") return undefined;
  return `${endpoint.replace(/\/+$/, "")}/v1/traces`;
}

/** Equal for settings one exporter can serve: a reload that keeps them keeps the exporter. */
export function exporterKey(settings: TracingSettings): string {
  return JSON.stringify([settings.tracesUrl, settings.serviceName, settings.timeoutMs]);
}

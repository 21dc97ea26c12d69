/**
 * A real OTLP/HTTP receiver on 127.0.0.1:0: it decodes the JSON the exporter posts to
 * /v1/traces (OTLP's JSON encoding: ids in hex, enums as numbers). It answers each post at once
 * with `answer`, or, with `hold`, keeps it unanswered until `release`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { once } from "node:events";
import { EventEmitter } from "node:events";

/** One attribute's value as OTLP/JSON writes it. */
export interface AnyValue {
  readonly stringValue?: string;
  readonly intValue?: string | number;
  readonly boolValue?: boolean;
  readonly doubleValue?: number;
}

/** One span as received. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly traceState?: string;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: ReadonlyArray<{ key: string; value: AnyValue }>;
  readonly status?: { code?: number };
  /** The resource's attributes, flattened to strings. */
  readonly resource: Record<string, string>;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** http://127.0.0.1:PORT, for `tracing.otlp_endpoint`. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Posts received, answered or not. */
  readonly posts: number;
  /** Posts held unanswered, in arrival order. */
  readonly held: ServerResponse[];
  /** Emits "post" after each post's spans were added. */
  readonly events: EventEmitter;
  /** `hold`: leave new posts unanswered; a number: answer them with that status. */
  mode: "hold" | number;
  /** Answers every held post with `status`. */
  release(status: number): void;
  /** Resolves once `count` posts in all have arrived. */
  postsReached(count: number): Promise<void>;
  close(): Promise<void>;
}

/** The attributes of `span` as a plain record of strings, numbers and booleans. */
export function attributesOf(span: ReceivedSpan): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of span.attributes) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
    scopeSpans?: Array<{ spans?: Array<Omit<ReceivedSpan, "resource">> }>;
  }>;
}

/** Starts a receiver answering 200 by default. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const events = new EventEmitter();
  const receiver = {
    url: "",
    spans: [] as ReceivedSpan[],
    posts: 0,
    held: [] as ServerResponse[],
    events,
    mode: 200 as "hold" | number,
    release(status: number) {
      for (const res of receiver.held.splice(0)) answer(res, status);
    },
    async postsReached(count: number) {
      while (receiver.posts < count) await once(events, "post");
    },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
  const answer = (res: ServerResponse, status: number) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end("{}");
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        answer(res, 404);
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest;
      for (const { resource, scopeSpans } of body.resourceSpans ?? []) {
        const resourceAttrs: Record<string, string> = {};
        for (const { key, value } of resource?.attributes ?? []) {
          resourceAttrs[key] = String(value.stringValue ?? value.intValue ?? value.boolValue);
        }
        for (const { spans } of scopeSpans ?? []) {
          for (const span of spans ?? []) receiver.spans.push({ ...span, resource: resourceAttrs });
        }
      }
      receiver.posts++;
      if (receiver.mode === "hold") receiver.held.push(res);
      else answer(res, receiver.mode);
      events.emit("post");
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, { url: `http://127.0.0.1:${port}` });
}

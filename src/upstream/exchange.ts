/**
 * One forwarded request, from the connection it is sent on to the response written to the
 * client. Responses are written here so hop-by-hop fields can be removed and gatehouse's own
 * headers added before anything reaches the client.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { errorReply, type Reply, type RequestContext } from "../core/context.js";
import { finalHeaders, sendReply } from "../core/respond.js";
import type { Services } from "../core/services.js";
import type { BodyFraming, ExchangeEvents, UpstreamConnection } from "./connection.js";
import type { Deadlines } from "./deadlines.js";
import { endToEnd, RESPONSE_HOP_BY_HOP } from "./hop-by-hop.js";
import { relaysInformational, writeInformational } from "./informational.js";
import { CONNECTION_CLOSED, CONNECTION_KEPT } from "./message-head.js";
import type { Pool, Waiting } from "./pool.js";
import { retriesOnNewConnection } from "./retry.js";

const RESPONSE_FIELDS_DROPPED: ReadonlySet<string> = new Set(RESPONSE_HOP_BY_HOP);
// RFC 9110 §8.6: a 204 has no content and carries no Content-Length (nor, §6.4.1, any framing).
// A 304 keeps its Content-Length, which describes the representation it stands for.
const NO_CONTENT_FIELDS_DROPPED: ReadonlySet<string> = new Set([
  ...RESPONSE_HOP_BY_HOP,
  "content-length",
]);

const BAD_GATEWAY_MESSAGE = "the upstream refused or reset the connection";
const GATEWAY_TIMEOUT_MESSAGE = "the upstream did not answer in time";
const BAD_GATEWAY = errorReply(502, "bad_gateway", BAD_GATEWAY_MESSAGE);
const GATEWAY_TIMEOUT = errorReply(504, "gateway_timeout", GATEWAY_TIMEOUT_MESSAGE);
// The same answers to a client still uploading: nothing reads the rest of its body any more, so
// its connection closes after the answer instead of waiting for a next request that never comes.
const CLOSE = { connection: "close" };
const BAD_GATEWAY_CLOSING = errorReply(502, "bad_gateway", BAD_GATEWAY_MESSAGE, CLOSE);
const GATEWAY_TIMEOUT_CLOSING = errorReply(504, "gateway_timeout", GATEWAY_TIMEOUT_MESSAGE, CLOSE);

function failureReply(timedOut: boolean, uploading: boolean): Reply {
  if (timedOut) return uploading ? GATEWAY_TIMEOUT_CLOSING : GATEWAY_TIMEOUT;
  return uploading ? BAD_GATEWAY_CLOSING : BAD_GATEWAY;
}

/** What the exchanges of one forwarder share. */
export interface Shared {
  readonly services: Services;
  readonly pool: Pool;
  readonly deadlines: Deadlines<Exchange>;
}

const EXCHANGE = Symbol("gatehouse.exchange");
type Tagged = (IncomingMessage | ServerResponse) & { [EXCHANGE]?: Exchange };

/** How `headers` frame the request body towards the upstream. */
function framingOf(headers: IncomingHttpHeaders): BodyFraming {
  if (headers["transfer-encoding"] !== undefined) return "chunked";
  const length = headers["content-length"];
  return length === undefined || length === "0" ? "none" : "length";
}

export class Exchange implements ExchangeEvents, Waiting {
  /** When (on the services' clock) the upstream's response headers must have arrived. */
  deadline: number;
  /** Kept by Deadlines. */
  slot = -1;
  connection: UpstreamConnection | null = null;
  timedOut = false;
  /** Some of the upstream's answer arrived: a 1xx at least. */
  answered = false;
  retried = false;
  reused = false;
  /** Nothing more is done for this exchange: answered, failed, or the client left. */
  done = false;
  /** The client's body is being relayed to the upstream. */
  private uploading = false;
  /** While uploading: listens for the client's connection to close. */
  private onClientGone: (() => void) | undefined = undefined;
  private readonly framing: BodyFraming;
  private readonly sentAt: number;

  constructor(
    private readonly shared: Shared,
    readonly ctx: RequestContext,
    private readonly timeoutMs: number,
    /** The request head up to its Connection field. */
    private readonly head: string,
  ) {
    this.sentAt = shared.services.clock.monotonic();
    this.deadline = this.sentAt + timeoutMs;
    this.framing = framingOf(ctx.req.headers);
    (ctx.res as Tagged)[EXCHANGE] = this;
    ctx.res.on("close", clientClosed);
  }

  start(connection: UpstreamConnection): void {
    this.connection = connection;
    this.reused = connection.uses > 0;
    const { req } = this.ctx;
    const head = this.head + (this.retried ? CONNECTION_CLOSED : CONNECTION_KEPT);
    connection.send(this, head, this.framing, req.method === "HEAD");
    if (this.framing === "none" || this.retried) return;
    this.uploading = true;
    (req as Tagged)[EXCHANGE] = this;
    req.on("data", uploadChunk);
    req.on("end", uploadEnd);
    // The request's own 'close' does not come once its response is complete: Node's server lets
    // go of a request it has answered.
    this.onClientGone = () => this.uploadCut();
    req.socket.on("close", this.onClientGone);
  }

  /** The deadline passed: the exchange ends with a 504. */
  expire(): void {
    this.timedOut = true;
    const error = Object.assign(new Error("no response headers within upstream.timeout"), {
      code: "ETIMEOUT",
    });
    if (this.connection !== null) {
      this.connection.abandon(error);
      return;
    }
    this.shared.pool.cancel(this);
    this.failed(error);
  }

  informational(status: number, message: string, headers: IncomingHttpHeaders): void {
    this.answered = true;
    const { req, res } = this.ctx;
    if (relaysInformational(req, status)) writeInformational(res, status, message, headers);
  }

  response(status: number, message: string, fields: IncomingHttpHeaders, keepAlive: boolean): void {
    const { services, deadlines } = this.shared;
    const { ctx } = this;
    const { req, res } = ctx;
    deadlines.remove(this);
    this.answered = true;
    ctx.upstreamMs = services.clock.monotonic() - this.sentAt;
    services.metrics.requests.upstreamResponse(ctx.upstreamMs / 1000);
    const headers = endToEnd(
      fields,
      status === 204 ? NO_CONTENT_FIELDS_DROPPED : RESPONSE_FIELDS_DROPPED,
      false,
    );
    // An answer while the client is still uploading: an upstream keeping its connection goes on
    // reading (a full-duplex exchange); one closing it wants no more of the body.
    if (!req.complete && !keepAlive) this.endUpload(headers);
    res.writeHead(status, message, finalHeaders(ctx, headers, services.lifecycle));
  }

  body(chunk: Buffer): void {
    const { res } = this.ctx;
    if (res.write(chunk)) return;
    const connection = this.connection as UpstreamConnection;
    connection.pause();
    res.once("drain", () => connection.resume());
  }

  complete(): void {
    this.done = true;
    this.ctx.res.end();
  }

  drained(): void {
    if (this.uploading) this.ctx.req.resume();
  }

  /**
   * For an upstream that answered before it had the whole request body (a 413, a 401) and closes
   * its connection: the rest is not sent (RFC 9112 §9.5: a client seeing such an answer stops
   * sending), and the client's connection closes after the answer (`Connection: close`), since
   * the rest of its upload is never read.
   */
  private endUpload(headers: IncomingHttpHeaders): void {
    this.stopUpload();
    headers.connection = "close";
  }

  /** Leaves the rest of the client's body unread. */
  private stopUpload(): void {
    if (!this.uploading) return;
    this.uploading = false;
    const { req } = this.ctx;
    req.removeListener("data", uploadChunk);
    req.removeListener("end", uploadEnd);
    this.forgetClient();
    req.pause();
  }

  /**
   * The client's connection closed before its body was complete. An exchange still waiting for
   * its answer ends as the client left; one already answered (the upstream answered early and
   * kept reading) closes its upstream connection, which would otherwise wait for the rest of a
   * body that never comes.
   */
  uploadCut(): void {
    if (!this.uploading) return;
    if (!this.done) {
      this.left();
      return;
    }
    this.stopUpload();
    this.connection?.abandon();
  }

  private forgetClient(): void {
    if (this.onClientGone === undefined) return;
    this.ctx.req.socket.removeListener("close", this.onClientGone);
    this.onClientGone = undefined;
  }

  /** The client's body is complete. */
  uploadEnded(): void {
    this.uploading = false;
    this.forgetClient();
    this.connection?.end();
  }

  // An exchange failed: retried on a new connection when that is safe, else answered 502 or
  // 504, or, when the answer has begun, cut off.
  failed(error: Error): void {
    const { services, deadlines, pool } = this.shared;
    const { ctx } = this;
    deadlines.remove(this);
    if (this.done) return;
    this.stopUpload();
    if (ctx.res.headersSent) {
      // A failure mid-answer cuts the client off: a truncated body is never presented whole.
      this.done = true;
      ctx.res.destroy();
      return;
    }
    if (retriesOnNewConnection(this, error)) {
      services.log.debug(
        { requestId: ctx.requestId, err: error },
        "pooled upstream connection failed; retrying on a new one",
      );
      this.retried = true;
      this.connection = null;
      deadlines.add(this);
      pool.fresh(this);
      return;
    }
    this.done = true;
    services.log.warn(
      { requestId: ctx.requestId, err: error },
      this.timedOut ? "upstream timed out" : "upstream failed",
    );
    sendReply(ctx, failureReply(this.timedOut, !ctx.req.complete), services.lifecycle);
  }

  /** The client left before its answer was complete: the upstream exchange goes with it. */
  left(): void {
    this.done = true;
    this.stopUpload();
    this.shared.deadlines.remove(this);
    if (this.connection !== null) this.connection.abandon();
    else this.shared.pool.cancel(this);
  }

  /** A piece of the request body arrived from the client. */
  uploaded(chunk: Buffer): void {
    // The upstream cannot answer before it has the body: while a body is still on its way to
    // the upstream, each chunk restarts the wait, so a slow client upload is not taken for a
    // slow upstream. A stalled upstream stops reading, the chunks stop, and the wait runs out.
    this.deadline = this.shared.services.clock.monotonic() + this.timeoutMs;
    const { connection } = this;
    if (connection !== null && !connection.write(chunk)) this.ctx.req.pause();
  }
}

function clientClosed(this: Tagged): void {
  const exchange = this[EXCHANGE];
  if (exchange !== undefined && !exchange.done) exchange.left();
}

function uploadChunk(this: Tagged, chunk: Buffer): void {
  this[EXCHANGE]?.uploaded(chunk);
}

function uploadEnd(this: Tagged): void {
  this[EXCHANGE]?.uploadEnded();
}

/**
 * One forwarded request: the undici dispatch handler that relays the upstream's answer to the
 * client. undici keeps the connection (pool, framing, reuse, the silence after the head); this
 * file keeps gatehouse's rules for what reaches the client: hop-by-hop fields removed,
 * gatehouse's own headers added, interim responses bounded, failures answered 502 or 504.
 */
import { PassThrough } from "node:stream";
import type { Dispatcher } from "undici";
import { errorReply, type Reply, type RequestContext } from "../core/context.js";
import { finalHeaders, sendReply } from "../core/respond.js";
import type { Services } from "../core/services.js";
import { HeldWrites } from "../http/held-pieces.js";
import type { Deadlines } from "./deadlines.js";
import { failureReason, upstreamError } from "./failures.js";
import { endToEnd, RESPONSE_HOP_BY_HOP } from "./hop-by-hop.js";
import { relaysInformational, writeInformational } from "./informational.js";
import { isFieldText, responseHeaders } from "./message-head.js";
import { retriesOnNewConnection } from "./retry.js";

type Controller = Dispatcher.DispatchController;

const RESPONSE_FIELDS_DROPPED: ReadonlySet<string> = new Set(RESPONSE_HOP_BY_HOP);
// RFC 9110 §8.6: a 204 has no content and carries no Content-Length (nor, §6.4.1, any framing).
// A 304 keeps its Content-Length, which describes the representation it stands for.
const NO_CONTENT_FIELDS_DROPPED: ReadonlySet<string> = new Set([
  ...RESPONSE_HOP_BY_HOP,
  "content-length",
]);

/** Interim responses relayed for one request at most; one more ends the exchange. */
const MAX_INTERIM = 10;

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
  /** The upstream's connection pool. */
  readonly dispatcher: Pick<Dispatcher, "dispatch">;
  /** A client with one connection of its own, for a retry. */
  readonly single: () => Pick<Dispatcher, "dispatch" | "close">;
  readonly deadlines: Deadlines<Exchange>;
}

const EXCHANGE = Symbol("gatehouse.exchange");
type Tagged = NodeJS.EventEmitter & { [EXCHANGE]?: Exchange };

export class Exchange implements Dispatcher.DispatchHandler {
  /** When (on the services' clock) the upstream's response head must have arrived. */
  deadline: number;
  /** Kept by Deadlines. */
  slot = -1;
  timedOut = false;
  /** Some of the upstream's answer arrived: a 1xx at least. */
  answered = false;
  retried = false;
  /** Nothing more is done for this exchange: answered, failed, or the client left. */
  done = false;
  private controller: Controller | null = null;
  private interim = 0;
  /** The response body's writes to the client, from its first piece on. */
  private body: HeldWrites | null = null;
  /** The client's body on its way to undici; null for a bodiless request. */
  private upload: PassThrough | null = null;
  protected readonly sentAt: number;

  constructor(
    protected readonly shared: Shared,
    readonly ctx: RequestContext,
    private readonly timeoutMs: number,
    private readonly options: Dispatcher.DispatchOptions,
    /** The client sends a body, streamed to the upstream as it comes. */
    readonly withBody: boolean,
  ) {
    this.sentAt = shared.services.clock.monotonic();
    this.deadline = this.sentAt + timeoutMs;
    (ctx.res as Tagged)[EXCHANGE] = this;
    ctx.res.on("close", clientClosed);
  }

  /** Hands the request to undici, its body (if any) streamed from the client. */
  send(): void {
    const options = this.withBody ? { ...this.options, body: this.startUpload() } : this.options;
    this.shared.dispatcher.dispatch(options, this);
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    // The client left, or the deadline passed, while the request waited for a connection.
    if (this.done) controller.abort(upstreamError("the exchange ended before it started", "EGONE"));
  }

  onResponseStart(
    controller: Controller,
    status: number,
    fields: Record<string, string | string[] | undefined>,
    message: string,
  ): void {
    if (this.done) return;
    // RFC 9112 §4: a status is three digits; RFC 9110 §15 gives meaning to 100-599 only.
    if (status < 100 || status > 599) {
      controller.abort(upstreamError(`the upstream sent status ${status}`, "EBADSTATUS"));
      return;
    }
    // llhttp lets a DEL through in a reason phrase; Node's server refuses to write it.
    if (!isFieldText(message)) {
      controller.abort(
        upstreamError(
          "the upstream's reason phrase has a character RFC 9112 forbids",
          "EBADSTATUS",
        ),
      );
      return;
    }
    if (status < 200) {
      this.informational(controller, status, message, fields);
      return;
    }
    const { services, deadlines } = this.shared;
    const { ctx } = this;
    const { req, res } = ctx;
    deadlines.remove(this);
    this.answered = true;
    ctx.upstreamMs = services.clock.monotonic() - this.sentAt;
    services.metrics.requests.upstreamResponse(ctx.upstreamMs / 1000);
    const headers = endToEnd(
      responseHeaders(fields),
      status === 204 ? NO_CONTENT_FIELDS_DROPPED : RESPONSE_FIELDS_DROPPED,
      false,
    );
    // An answer that begins while the client is still uploading: undici stops sending the body
    // once the answer is complete, so the rest of the upload may never be read, and the client's
    // connection closes after the answer instead of waiting for it.
    if (!req.complete) headers.connection = "close";
    res.writeHead(status, message, finalHeaders(ctx, headers, services.lifecycle));
    // RFC 9110 §15.3.5, §15.4.5: a 204 and a 304 end at their head. undici reads a 304's
    // Content-Length (the representation's, §8.6) as a body still owed, and fails the exchange
    // after it; the client has its whole answer by then.
    if (status === 204 || status === 304) this.onResponseEnd();
  }

  /**
   * One write to the client at a time (see HeldWrites): what comes meanwhile is held and written
   * as one piece when that write is done, so an upstream's one-byte chunks neither pile up
   * megabytes of Node's bookkeeping per slow client nor cost a write each.
   */
  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.done) return;
    // undici stops reading the upstream until the write under way is done.
    const body = (this.body ??= new HeldWrites(this.ctx.res, () => controller.resume()));
    if (!body.write(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    if (this.done) return;
    this.done = true;
    if (this.body === null) this.ctx.res.end();
    else this.body.end();
  }

  onResponseError(_controller: Controller, error: Error): void {
    this.failed(error);
  }

  /** The deadline for the response head passed: the exchange ends with a 504. */
  expire(): void {
    this.timedOut = true;
    const error = upstreamError("no response head within upstream.timeout", "ETIMEOUT");
    if (this.controller !== null) this.controller.abort(error);
    else this.failed(error);
  }

  /** An interim response: relayed when the client can take it, within MAX_INTERIM. */
  private informational(
    controller: Controller,
    status: number,
    message: string,
    fields: Record<string, string | string[] | undefined>,
  ): void {
    this.answered = true;
    this.interim += 1;
    if (this.interim > MAX_INTERIM) {
      controller.abort(
        upstreamError(`the upstream sent more than ${MAX_INTERIM} interim responses`, "EINTERIM"),
      );
      return;
    }
    const { req, res } = this.ctx;
    // A client that has not taken the last one gets no more: an interim response is advice, and
    // what the client does not read would pile up here.
    if (res.socket === null || res.socket.writableNeedDrain || !relaysInformational(req)) return;
    writeInformational(res, status, message, responseHeaders(fields));
  }

  // An exchange failed: retried on a new connection when that is safe, else answered 502 or
  // 504, or, when the answer has begun, cut off.
  protected failed(error: Error): void {
    const { services, deadlines } = this.shared;
    const { ctx } = this;
    deadlines.remove(this);
    if (this.done) return;
    if (ctx.res.headersSent) {
      // A failure mid-answer cuts the client off: a truncated body is never presented whole.
      this.done = true;
      this.body?.drop();
      this.stopUpload();
      this.logFailure(this.reasonOf(error), error, "upstream failed mid-answer");
      ctx.res.destroy();
      return;
    }
    if (retriesOnNewConnection(this, error)) {
      services.log.debug(
        { requestId: ctx.requestId, err: error },
        "upstream connection closed before any answer; retrying on a new one",
      );
      this.retried = true;
      this.controller = null;
      deadlines.add(this);
      // On a connection of its own, closed after it: another pooled one may be as stale.
      const single = this.shared.single();
      single.dispatch({ ...this.options, reset: true }, this);
      single.close().catch(() => undefined);
      return;
    }
    this.done = true;
    const reason = this.reasonOf(error);
    const timedOut = reason === "timeout";
    this.logFailure(reason, error, timedOut ? "upstream timed out" : "upstream failed");
    const uploading = !ctx.req.complete;
    this.stopUpload();
    sendReply(ctx, failureReply(timedOut, uploading), services.lifecycle);
  }

  // gatehouse's deadline, or undici's bound on a connection attempt, is a timeout: a 504.
  private reasonOf(error: Error): string {
    return this.timedOut ? "timeout" : failureReason(error);
  }

  private logFailure(reason: string, error: Error, message: string): void {
    const { services } = this.shared;
    services.metrics.upstreamFailures.inc({ reason });
    services.log.warn({ requestId: this.ctx.requestId, reason, err: error }, message);
  }

  /** The client left before its answer was complete: the upstream exchange goes with it. */
  left(): void {
    this.done = true;
    this.body?.drop();
    this.shared.deadlines.remove(this);
    this.stopUpload();
    this.controller?.abort(upstreamError("the client left", "EGONE"));
  }

  /**
   * The client's body, piped into a stream of undici's: undici destroys the stream it was given
   * when the exchange ends, and the client's own request must outlive that, to be answered.
   */
  private startUpload(): PassThrough {
    const { req } = this.ctx;
    const upload = new PassThrough();
    this.upload = upload;
    (req as Tagged)[EXCHANGE] = this;
    req.on("data", uploadProgress);
    upload.on("close", () => this.stopUpload());
    req.pipe(upload);
    return upload;
  }

  /** Leaves the rest of the client's body unread. */
  private stopUpload(): void {
    const { upload } = this;
    if (upload === null) return;
    this.upload = null;
    const { req } = this.ctx;
    req.removeListener("data", uploadProgress);
    req.unpipe(upload);
    if (!req.complete) req.pause();
    upload.destroy();
  }

  /** A piece of the request body arrived from the client. */
  uploaded(): void {
    // The upstream cannot answer before it has the body: while a body is still on its way to
    // the upstream, each chunk restarts the wait, so a slow client upload is not taken for a
    // slow upstream. A stalled upstream stops reading, the chunks stop, and the wait runs out.
    this.deadline = this.shared.services.clock.monotonic() + this.timeoutMs;
  }
}

function clientClosed(this: Tagged): void {
  const exchange = this[EXCHANGE];
  if (exchange !== undefined && !exchange.done) exchange.left();
}

function uploadProgress(this: Tagged): void {
  this[EXCHANGE]?.uploaded();
}

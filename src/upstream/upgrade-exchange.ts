/**
 * A WebSocket handshake sent upstream through undici's upgrade: a 101 hands the upstream's
 * connection to the relay (websocket/upgrade.ts) once it answers the client's key; any other
 * answer is relayed as an answer, as every exchange's is.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import type { RequestContext } from "../core/context.js";
import { answersKey, switchProtocols, type RelayDeps } from "../websocket/upgrade.js";
import { Exchange, type Shared } from "./exchange.js";
import { upstreamError } from "./failures.js";

export class UpgradeExchange extends Exchange {
  constructor(
    shared: Shared,
    ctx: RequestContext,
    timeoutMs: number,
    options: Dispatcher.DispatchOptions,
    private readonly relay: RelayDeps,
  ) {
    super(shared, ctx, timeoutMs, options, false);
  }

  onRequestUpgrade(
    _controller: Dispatcher.DispatchController,
    _status: number,
    fields: IncomingHttpHeaders,
    socket: Duplex,
  ): void {
    // The client left, or the deadline passed, while the upstream was switching.
    if (this.done) {
      socket.destroy();
      return;
    }
    // RFC 6455 §4.1: a 101 that does not answer the client's key is no WebSocket server's answer
    // to this handshake (a server that switches whatever it is asked to, say): the client would
    // fail the connection, so it gets the upstream's failure instead, and the upstream's
    // connection, in a protocol nobody agreed on, is closed.
    if (!answersKey(this.ctx.req.headers["sec-websocket-key"], fields["sec-websocket-accept"])) {
      socket.destroy();
      this.failed(
        upstreamError("the upstream's 101 has no valid Sec-WebSocket-Accept", "EBADACCEPT"),
      );
      return;
    }
    const { services, deadlines } = this.shared;
    deadlines.remove(this);
    this.answered = true;
    this.done = true;
    this.ctx.upstreamMs = services.clock.monotonic() - this.sentAt;
    switchProtocols(this.ctx, fields, socket, this.relay);
  }
}

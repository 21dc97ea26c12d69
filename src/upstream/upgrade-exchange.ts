/**
 * A WebSocket handshake sent upstream through undici's upgrade: a 101 hands the upstream's
 * connection to the relay (websocket/upgrade.ts); any other answer is relayed as an answer, as
 * every exchange's is.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Duplex } from "node:stream";
import type { Dispatcher } from "undici";
import type { RequestContext } from "../core/context.js";
import { switchProtocols, type RelayDeps } from "../websocket/upgrade.js";
import { Exchange, type Shared } from "./exchange.js";

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
    const { services, deadlines } = this.shared;
    deadlines.remove(this);
    this.answered = true;
    this.done = true;
    this.ctx.upstreamMs = services.clock.monotonic() - this.sentAt;
    switchProtocols(this.ctx, fields, socket, this.relay);
  }
}

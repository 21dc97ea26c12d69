import type { UpstreamSettings } from "../upstream/settings.js";
import { HANDLED, type Stage } from "../core/context.js";
import { sendsBody, type Forwarder } from "../upstream/forwarder.js";
import { createUpstreamHeaders, type DroppedHeaders } from "../upstream/request-headers.js";
import type { RelayDeps } from "../websocket/upgrade.js";

/** Sends the request, as decided by the stages before, to the upstream; streams both ways. */
export function createForwardStage(
  upstream: UpstreamSettings,
  forwarder: Forwarder,
  droppedHeaders: DroppedHeaders,
  relay: RelayDeps,
): Stage {
  const upstreamHeaders = createUpstreamHeaders(upstream, droppedHeaders);
  return function forward(ctx) {
    // A WebSocket handshake: a 101 makes the connection a relay of frames both ways.
    if (ctx.upgrade !== undefined) {
      upstreamHeaders(ctx);
      forwarder.upgrade(ctx, upstream.timeoutMs, relay);
      return HANDLED;
    }
    // Node hands only `Expect: 100-continue` to the server (others get 417): the client waits
    // for 100 Continue, sent only now that the request is known to go on (RFC 9110 §10.1.1).
    const continueFirst = ctx.req.headers.expect !== undefined;
    // Read before the headers become the upstream's: undici frames the body anew.
    const withBody = sendsBody(ctx.req.headers);
    upstreamHeaders(ctx);
    if (continueFirst) ctx.res.writeContinue();
    forwarder.forward(ctx, upstream.timeoutMs, withBody);
    return HANDLED;
  };
}

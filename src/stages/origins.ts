import { errorReply, type Reply, type Stage } from "../core/context.js";
import { takeCookie } from "../http/cookies.js";

const OTHER_SITE = errorReply(
  403,
  "origin_not_allowed",
  "this route does not serve pages of this Origin; its origins list the sites it serves",
);
const NO_ORIGIN = errorReply(
  403,
  "origin_not_allowed",
  "a token sent in a cookie needs the Origin of a site this route serves",
);

/**
 * A route's `origins`: a browser names the page's site in Origin (RFC 6454 §7), and sends cookies
 * whatever site the page is on, so a page elsewhere could use a signed-in user's cookie to open a
 * WebSocket (cross-site WebSocket hijacking) or send a request. An Origin not listed is refused;
 * a token in the route's cookie needs a listed Origin. A client without a browser sends no Origin
 * and passes, unless it sends the cookie. Before the token is read: no cost, nothing counted.
 */
export function createOriginsStage(): Stage {
  return function origins(ctx): Reply | undefined {
    const allowed = ctx.route?.origins;
    if (allowed === undefined) return undefined;
    const origin = ctx.req.headers.origin;
    if (origin !== undefined) return allowed.has(origin) ? undefined : OTHER_SITE;
    const cookie = ctx.route?.tokenFrom.cookie;
    if (cookie === undefined) return undefined;
    return takeCookie(ctx.req.headers.cookie, cookie).values.length > 0 ? NO_ORIGIN : undefined;
  };
}

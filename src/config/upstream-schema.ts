/**
 * The `upstream` section: where requests are forwarded, how the pool to it behaves, and the
 * request headers gatehouse sets, removes or passes on.
 */
import { z } from "zod";
import { problem, type Ctx } from "./cross-checks.js";
import { checkUpstreamUrl } from "./schema-checks.js";
import { headerName, optionalHeaderName, positiveDuration, positiveInt } from "./schema-fields.js";

/** The `upstream` section, with its defaults. */
export const UpstreamSchema = z
  .strictObject(
    {
      url: z
        .string({
          error: (issue) =>
            issue.input === undefined
              ? "is required: the upstream's base URL, such as http://127.0.0.1:3000"
              : "must be a URL string, such as http://127.0.0.1:3000",
        })
        .superRefine(checkUpstreamUrl)
        .describe("The upstream's base URL (http or https, no userinfo)."),
      timeout: positiveDuration("No response headers in this time: 504.").default("30s"),
      max_sockets: positiveInt("Keep-alive pool size to the upstream.").default(256),
      idle_timeout: positiveDuration(
        "A pooled connection idle this long is closed; keep it below the upstream's own.",
      ).default("4s"),
      server_name: z
        .string({ error: "must be a host name string" })
        .regex(/^$|^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/, {
          error: "must be a DNS host name, such as api.internal.example",
        })
        .default("")
        .describe(
          "An https upstream: the name sent in SNI and checked on its certificate, when it differs from the URL's host.",
        ),
      identity_header: headerName
        .default("X-Client-Id")
        .describe("Set to the authenticated client id; inbound copies are removed."),
      issuer_header: optionalHeaderName
        .default("X-Client-Issuer")
        .describe(
          'Set to the token\'s issuer name ("own" for gatehouse\'s); inbound copies are removed; "" for none.',
        ),
      scopes_header: optionalHeaderName
        .default("X-Client-Scopes")
        .describe('Set to the token\'s granted scopes; inbound copies are removed; "" for none.'),
      forward_authorization: z
        .boolean({ error: "must be true or false" })
        .default(false)
        .describe("Pass the bearer token on to the upstream."),
      websocket: z
        .strictObject({
          idle_timeout: positiveDuration(
            "A WebSocket connection with no frame either way for this long is closed (1001).",
          ).default("10m"),
          max_connections: positiveInt(
            "Open WebSocket connections of this process, counted apart from max_connections; a handshake over it is answered 503 with Retry-After.",
          ).default(512),
        })
        .prefault({}),
      underscore_headers: z
        .enum(["drop", "keep"], { error: "must be drop or keep" })
        .default("drop")
        .describe(
          "Request headers with _ in their name: drop them all, or keep those that, with _ read as -, name no header gatehouse sets or removes.",
        ),
    },
    {
      error: (issue) =>
        issue.input === undefined
          ? "is required, with at least url: the service gatehouse protects"
          : "must be a mapping with at least url",
    },
  )
  .superRefine(checkServerName);

function checkServerName(upstream: { url: string; server_name: string }, ctx: Ctx): void {
  if (upstream.server_name !== "" && !upstream.url.startsWith("https:")) {
    problem(ctx, ["server_name"], "needs an https:// url: an http:// upstream has no TLS name");
  }
}

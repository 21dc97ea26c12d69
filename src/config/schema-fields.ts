/**
 * The value types the configuration schema is built from (durations, counts, listen addresses,
 * CIDR blocks, header names, language codes, gatehouse's own paths, scopes, resource URIs), each
 * with the message that a wrong value gets.
 */
import { z } from "zod";
import { DURATION_PATTERN, POSITIVE_DURATION_PATTERN } from "./duration.js";
import {
  checkListedOnce,
  checkOwnPath,
  isCidr,
  isListenAddress,
  isResourceUri,
} from "./schema-checks.js";

/** A duration, zero allowed. */
export const duration = (description: string) =>
  z
    .string({ error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d" })
    .regex(new RegExp(DURATION_PATTERN), {
      error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d (a whole number and a unit)",
    })
    .describe(description);

/** A duration greater than zero. */
export const positiveDuration = (description: string) =>
  z
    .string({ error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d" })
    .regex(new RegExp(POSITIVE_DURATION_PATTERN), {
      error: "must be a duration greater than zero, such as 500ms, 30s, 1m, 1h or 1d",
    })
    .describe(description);

/** A whole number from 1 to the largest safe integer. */
export const positiveInt = (description: string) =>
  z
    .number({ error: "must be a whole number" })
    .int({ error: "must be a whole number" })
    .min(1, { error: "must be at least 1" })
    .max(Number.MAX_SAFE_INTEGER, { error: "is too large" })
    .describe(description);

/** A HOST:PORT address to listen on. */
export const listenAddress = (description: string) =>
  z
    .string({ error: "must be HOST:PORT, such as 0.0.0.0:8080 or [::]:8080" })
    .refine(isListenAddress, {
      error: "must be HOST:PORT with a port from 0 to 65535, such as 0.0.0.0:8080 or [::]:8080",
    })
    .describe(description);

/** An IP address or a CIDR block. */
export const cidr = z.string().refine(isCidr, {
  error: "must be an IP address or a CIDR block, such as 10.0.0.0/8 or fd00::/8",
});

/** An HTTP header name: a token, as RFC 9110 §5.1 has it. */
export const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, {
  error: "must be an HTTP header name, such as X-Client-Id",
});

/** A language code, such as fr. */
export const languageCode = z.string().regex(/^[a-z]{2,3}$/, {
  error: "must be a two- or three-letter lower-case language code, such as fr",
});

/** One of gatehouse's own paths, such as the token endpoint's. */
export const ownPath = z.string().superRefine(checkOwnPath);

/**
 * A host name as a `Host` field carries it (RFC 1123 §2.1 labels): no scheme, port or path, which
 * the admin listener's Host check ignores or never sees.
 */
export const hostName = z
  .string()
  .regex(
    /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/,
    {
      error: "must be a host name such as gatehouse.internal, without a scheme, port or path",
    },
  );

/** An HTTP header name, or "" for none. */
export const optionalHeaderName = z.string().regex(/^([!#$%&'*+.^_`|~0-9A-Za-z-]+)?$/, {
  error: 'must be an HTTP header name, such as X-Client-Scopes, or "" for none',
});

/** A scope token (RFC 6749 §3.3): printable ASCII without space, `"` or `\`. */
export const scopeToken = z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, {
  error: 'must be a scope token: printable ASCII without spaces, " or \\, such as items:read',
});

/** A list of scope tokens. */
export const scopeList = (description: string) =>
  z.array(scopeToken).superRefine(checkListedOnce).describe(description);

/** A resource indicator (RFC 8707 §2): an absolute URI without a fragment. */
export const resourceUri = z.string().refine(isResourceUri, {
  error: "must be an absolute URI without a fragment, such as https://api.example.com",
});

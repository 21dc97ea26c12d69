/**
 * One fetch of a trusted issuer's keys: its metadata (RFC 8414, then OpenID Connect Discovery)
 * unless `jwks_uri` is given, then its JWKS. Each URL is https (http on a loopback host), each
 * answer is capped in size and time, and a redirect is followed only to another such URL.
 */
import type { JSONWebKeySet, JWK } from "jose";
import type { Clock } from "../clock.js";
import { secureUrl } from "../http/secure-url.js";

/** Largest metadata document or JWKS read; a larger answer is a failed fetch. */
export const MAX_KEYS_BYTES = 1024 * 1024;
/** Longest a metadata document or JWKS may take to arrive. */
export const KEYS_FETCH_TIMEOUT_MS = 5000;
const MAX_REDIRECTS = 3;

/** Why a fetch failed: the `result` label of `gatehouse_issuer_keys_fetch_total`. */
export type FetchFailure =
  | "timeout"
  | "too_large"
  | "http_error"
  | "network"
  | "invalid"
  | "insecure_url"
  | "issuer_mismatch"
  | "no_keys";

/** A fetch that failed, with a message for the log. */
export class KeysFetchFailed extends Error {
  constructor(
    readonly result: FetchFailure,
    message: string,
  ) {
    super(message);
    this.name = "KeysFetchFailed";
  }
}

/** Where a provider's keys are: its `issuer`, and `jwks_uri` ("" to discover it). */
export interface KeysLocation {
  readonly issuer: string;
  readonly jwksUri: string;
}

class HttpStatus extends KeysFetchFailed {
  constructor(
    readonly status: number,
    url: string,
  ) {
    super("http_error", `${url} answered ${status}`);
  }
}

async function readCapped(response: Response, url: string): Promise<string> {
  const declared = Number(response.headers.get("content-length"));
  if (declared > MAX_KEYS_BYTES) {
    await response.body?.cancel();
    throw new KeysFetchFailed("too_large", `${url} is over ${MAX_KEYS_BYTES} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body !== null) {
    for await (const chunk of response.body) {
      size += chunk.byteLength;
      if (size > MAX_KEYS_BYTES) {
        await response.body.cancel().catch(() => undefined);
        throw new KeysFetchFailed("too_large", `${url} is over ${MAX_KEYS_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
  }
  return Buffer.concat(chunks).toString("utf8");
}

// One GET of a JSON document within the caps. Redirects are followed here, not by fetch, so that
// each target is checked: never to another scheme, never to a host that is not https.
async function getJson(start: string, clock: Clock): Promise<unknown> {
  const controller = new AbortController();
  const deadline = clock.after(KEYS_FETCH_TIMEOUT_MS, () => controller.abort());
  let url = start;
  try {
    for (let hop = 0; ; hop++) {
      const response = await fetch(url, {
        redirect: "manual",
        signal: controller.signal,
        headers: { accept: "application/json" },
      });
      const location = response.headers.get("location");
      if (response.status >= 300 && response.status < 400 && location !== null) {
        await response.body?.cancel();
        const next = new URL(location, url);
        if (hop >= MAX_REDIRECTS || next.protocol !== new URL(url).protocol) {
          throw new KeysFetchFailed(
            "insecure_url",
            `${url} redirects to ${next.href}: not followed`,
          );
        }
        if (secureUrl(next.href) === undefined) {
          throw new KeysFetchFailed("insecure_url", `${url} redirects to ${next.href}: not https`);
        }
        url = next.href;
        continue;
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new HttpStatus(response.status, url);
      }
      const text = await readCapped(response, url);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new KeysFetchFailed("invalid", `${url} is not JSON`);
      }
    }
  } catch (error) {
    if (error instanceof KeysFetchFailed) throw error;
    if (controller.signal.aborted) {
      throw new KeysFetchFailed("timeout", `${url} took over ${KEYS_FETCH_TIMEOUT_MS} ms`);
    }
    throw new KeysFetchFailed("network", `${url}: ${(error as Error).message}`);
  } finally {
    deadline.cancel();
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// RFC 8414 §3.1: the well-known path goes between the issuer's host and its path; OpenID Connect
// Discovery 1.0 §4: after the issuer's path.
function metadataUrls(issuer: string): readonly string[] {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, "");
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
  ];
}

// RFC 8414 §3.3: the document's issuer must be the one it was fetched for, exactly; a document
// naming another is an answer from the wrong provider, not a reason to try the other document.
async function discoverJwksUri(issuer: string, clock: Clock): Promise<string> {
  let document: unknown;
  for (const url of metadataUrls(issuer)) {
    try {
      document = await getJson(url, clock);
      break;
    } catch (error) {
      const notThere = error instanceof HttpStatus && error.status >= 400 && error.status < 500;
      if (!notThere || url.endsWith("/openid-configuration")) throw error;
    }
  }
  if (!isObject(document))
    throw new KeysFetchFailed("invalid", `${issuer}: metadata is not an object`);
  if (document.issuer !== issuer) {
    throw new KeysFetchFailed(
      "issuer_mismatch",
      `the metadata of ${issuer} names the issuer ${JSON.stringify(document.issuer)}`,
    );
  }
  const jwksUri = document.jwks_uri;
  if (typeof jwksUri !== "string" || secureUrl(jwksUri) === undefined) {
    throw new KeysFetchFailed(
      "insecure_url",
      `the metadata of ${issuer} has no https jwks_uri (${JSON.stringify(jwksUri)})`,
    );
  }
  return jwksUri;
}

/** Fetches the JWKS of `location`, discovering its URL when none is given; throws KeysFetchFailed. */
export async function fetchKeys(location: KeysLocation, clock: Clock): Promise<JSONWebKeySet> {
  const jwksUri =
    location.jwksUri === "" ? await discoverJwksUri(location.issuer, clock) : location.jwksUri;
  const jwks = await getJson(jwksUri, clock);
  if (!isObject(jwks) || !Array.isArray(jwks.keys)) {
    throw new KeysFetchFailed("invalid", `${jwksUri} is not a JWKS (RFC 7517 §5)`);
  }
  return { keys: jwks.keys.filter(isObject) as JWK[] };
}

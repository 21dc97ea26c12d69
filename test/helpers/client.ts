/** A plain HTTP client over a fresh socket per request, keeping the answer's raw headers. */
import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from "node:http";
import type { Readable } from "node:stream";

/** What the client got back. */
export interface ClientResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

/** What to send; `body` may be a stream, piped as it is produced. */
export interface ClientRequest {
  readonly method?: string;
  readonly headers?: OutgoingHttpHeaders;
  readonly body?: Buffer | string | Readable;
  /** The local address to send from (any of 127.0.0.0/8 on loopback): another client's peer. */
  readonly localAddress?: string;
}

/** Sends one request to `url` (no keep-alive) and collects the whole answer. */
export function send(url: string, options: ClientRequest = {}): Promise<ClientResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: options.method ?? "GET",
      headers: options.headers,
      agent: false,
      localAddress: options.localAddress,
    });
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
        }),
      );
    });
    const { body } = options;
    if (body === undefined) req.end();
    else if (typeof body === "string" || Buffer.isBuffer(body)) req.end(body);
    else body.pipe(req);
  });
}

/** Parses a JSON body. */
export function json(response: ClientResponse): Record<string, unknown> {
  return JSON.parse(response.body.toString("utf8")) as Record<string, unknown>;
}

/**
 * Polls `probe` every 50 ms until it returns true or `deadlineMs` passes; resolves with the last
 * result. The deadline only ends a wait that has already failed, so it is wide: a machine busy
 * with other tests is not taken for a fault.
 */
export async function eventually(
  probe: () => boolean | Promise<boolean>,
  deadlineMs = 30_000,
): Promise<boolean> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > end) return false;
    await new Promise((done) => setTimeout(done, 50));
  }
}

/**
 * Waits until an upstream streaming to a client that does not read can write no more: every
 * buffer on the way is full. A whole exchange through the same gatehouse (a GET of `probeUrl`) is
 * the yardstick: one that ends with `written()` where it was when it began means gatehouse is no
 * longer reading the upstream. `each` runs after every exchange. Resolves with their statuses.
 */
export async function untilHeldBack(
  probeUrl: string,
  written: () => number,
  each: () => Promise<void> = async () => undefined,
): Promise<number[]> {
  const statuses: number[] = [];
  let seen = -1;
  while (seen !== written()) {
    seen = written();
    statuses.push((await send(probeUrl)).status);
    await each();
  }
  return statuses;
}

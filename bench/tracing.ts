/**
 * `tracing`: the `full` request through two gatehouse processes that export a span for every
 * request (sample_ratio 1) over OTLP/HTTP to a receiver this process runs, side by side with the
 * bare forwarder. `full` is the same request with tracing off; the two ratios together say what
 * exporting costs. The receiver reads every post and answers 200, as a collector does.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { markdownSection } from "./report.js";
import { fullRequest, type Pairing } from "./scenarios.js";
import type { Shared } from "./shared.js";

/** A receiver on 127.0.0.1:0 counting the posts and bytes it was sent. */
async function startReceiver(): Promise<{ url: string; posts: () => number; bytes: () => number }> {
  let posts = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => (bytes += chunk.length));
    req.on("end", () => {
      posts++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  // The bench ends when its measurements do, whatever the receiver still has open.
  server.unref();
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, posts: () => posts, bytes: () => bytes };
}

/** Starts the receiver and two exporting gatehouse processes; pairs them with the bare ones. */
export async function prepareTracing(shared: Shared): Promise<Pairing> {
  const receiver = await startReceiver();
  const pair = await shared.variants("gatehouse tracing", {
    more: `tracing:\n  otlp_endpoint: ${receiver.url}\n  sample_ratio: 1\n`,
  });
  const { path, headers } = await fullRequest(pair[0], shared.secrets);
  return {
    baseline: { label: "bare http-proxy-3", served: await shared.bares(), path, headers },
    candidate: { label: "gatehouse, exporting spans", served: pair, path, headers },
    after: async () =>
      markdownSection(
        `tracing: the receiver got ${receiver.posts()} OTLP/HTTP posts, ${(receiver.bytes() / 1e6).toFixed(1)} MB of spans.`,
      ),
  };
}

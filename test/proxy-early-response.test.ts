/**
 * An upstream that refuses an upload answers before it has read the body and closes its
 * connection (RFC 9112 §9.5: the sender should stop and read the answer). gatehouse is then still
 * writing the body, and that write fails (EPIPE, or ECONNRESET once the upstream's kernel resets
 * the connection) while the answer already waits, unread, on the socket. The answer the upstream
 * sent must reach the client, never a 502 made from the failed write; and the client's upload,
 * which nobody reads any more, ends with its connection instead of being read to its end.
 */
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { parseResponse } from "./helpers/raw.js";
import { startRawUpstream } from "./helpers/raw-upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [POST]
    auth: none
`;

const REFUSAL_BODY = '{"error":"large"}';
const REFUSAL =
  "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n" +
  `Content-Length: ${REFUSAL_BODY.length}\r\nConnection: close\r\n\r\n${REFUSAL_BODY}`;

// Raw upstreams answer at once, without reading the body: /v1/destroy then drops the connection
// (its kernel resets it, unread bytes being left), /v1/end half-closes it, /v1/reset answers
// nothing at all.
const raw = await startRawUpstream((ex) => {
  if (ex.path !== "/v1/reset") ex.socket.write(REFUSAL);
  if (ex.path === "/v1/end") ex.socket.end();
  else ex.socket.destroy();
});
// A Node server refusing the upload as an application would: it answers and closes.
const node: Server = createServer((_req, res) => {
  res.writeHead(413, {
    "content-type": "application/json",
    "content-length": REFUSAL_BODY.length,
    connection: "close",
  });
  res.end(REFUSAL_BODY);
});
await new Promise<void>((done) => node.listen(0, "127.0.0.1", done));
const rawGh = await startTestGatehouse(configFor(raw.url, ROUTES));
const nodeGh = await startTestGatehouse(
  configFor(`http://127.0.0.1:${(node.address() as AddressInfo).port}`, ROUTES),
);
t.teardown(async () => {
  await rawGh.close();
  await nodeGh.close();
  await raw.close();
  node.closeAllConnections();
  await new Promise<void>((done) => node.close(() => done()));
});

// Far more than the kernel buffers between client and gatehouse can hold (net.ipv4.tcp_rmem and
// tcp_wmem allow 32 MiB and 4 MiB at most on common kernels): an upload that is not read to its
// end cannot finish.
const BODY = 64 * 1024 * 1024;
const HEAD = (path: string): string =>
  `POST ${path} HTTP/1.1\r\nHost: gatehouse.test\r\nContent-Length: ${BODY}\r\n\r\n`;
const PAYLOAD = Buffer.alloc(BODY, 0x78);

/**
 * Uploads the whole body in one write, so that the client, like gatehouse, reads what came back
 * before it learns that its write failed; resolves with what it read once the connection closed.
 */
function upload(port: number, path: string): Promise<{ text: string; uploaded: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let uploaded = false;
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    // gatehouse closing the connection under the upload fails the write; that is expected.
    socket.on("error", () => {});
    socket.on("close", () => resolve({ text: Buffer.concat(chunks).toString("latin1"), uploaded }));
    socket.write(HEAD(path));
    socket.write(PAYLOAD, (error) => (uploaded = error == null));
  });
}

/** `rounds` uploads, four at a time; the count of each status line's code seen. */
async function uploads(port: number, path: string, rounds: number) {
  const statuses = new Map<number, number>();
  let refusals = 0;
  let uploadedWhole = 0;
  for (let round = 0; round < rounds; round += 4) {
    const batch = [0, 1, 2, 3].map(() => upload(port, path));
    for (const { text, uploaded } of await Promise.all(batch)) {
      const response = parseResponse(text);
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      if (response.body === REFUSAL_BODY && response.headers.connection === "close") refusals++;
      if (uploaded) uploadedWhole++;
    }
  }
  return { statuses: [...statuses], refusals, uploadedWhole };
}

// Enough rounds that the failed write, which used to win most races, is met many times.
const ROUNDS = 60;

const cases: Array<[string, number, string]> = [
  ["an upstream that answers and resets", rawGh.port, "/v1/destroy"],
  ["an upstream that answers and half-closes", rawGh.port, "/v1/end"],
  ["a Node upstream that answers and closes", nodeGh.port, "/v1/upload"],
];
for (const [name, port, path] of cases) {
  t.test(`${name}: its early 413 reaches the client, every time`, async (t) => {
    const seen = await uploads(port, path, ROUNDS);
    t.strictSame(seen.statuses, [[413, ROUNDS]], "every answer is the upstream's 413, no 502");
    t.equal(seen.refusals, ROUNDS, "each with its whole body, and the connection closing");
    t.equal(seen.uploadedWhole, 0, "no upload was read to its end");
  });
}

t.test(
  "an upstream that resets mid-upload without answering: 502, connection closed",
  async (t) => {
    const seen = await uploads(rawGh.port, "/v1/reset", 8);
    t.strictSame(seen.statuses, [[502, 8]], "bad_gateway for each");
    t.equal(seen.uploadedWhole, 0, "the rest of the upload was not read, the connection closed");
  },
);

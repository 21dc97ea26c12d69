/**
 * An upstream that answers before the whole request body and keeps its connection goes on
 * reading the body; when the client then goes away mid-upload, that upstream connection must not
 * stay busy waiting for the rest. With one pooled connection, a stuck one would leave every later
 * request waiting.
 */
import { connect, type Socket } from "node:net";
import t from "tap";
import { eventually, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startRawUpstream } from "./helpers/raw-upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET, POST]
    auth: none
`;

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

t.test("a client that leaves mid-upload after an early answer frees the connection", async (t) => {
  const uploads: Socket[] = [];
  const upstream = await startRawUpstream((ex) => {
    // Answers at once and keeps the connection, reading the body as it comes.
    if (ex.method === "POST") uploads.push(ex.socket);
    ex.socket.write(OK);
  });
  // A long upstream.timeout: a connection left busy shows as a request that hangs, not as a 504
  // that a slow machine could give too.
  const config = configFor(upstream.url, ROUTES)
    .replace("timeout: 2s", "timeout: 60s\n  max_sockets: 1")
    .replace("grace: 2s", "grace: 1s");
  const gh = await startTestGatehouse(config);
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });

  const client = connect(gh.port, "127.0.0.1");
  let text = "";
  client.setEncoding("latin1");
  client.on("data", (chunk: string) => (text += chunk));
  client.on("error", () => undefined);
  client.write(
    "POST /v1/upload HTTP/1.1\r\nHost: gatehouse.test\r\nContent-Length: 1000000\r\n\r\n" +
      "x".repeat(4096),
  );
  t.ok(await eventually(async () => text.endsWith("\r\n\r\nok")), "the early answer arrived");
  t.match(text, /^HTTP\/1\.1 200 /);
  client.destroy();

  const [upload] = uploads;
  let closed = upload?.destroyed ?? false;
  upload?.on("close", () => (closed = true));
  t.ok(await eventually(async () => closed), "gatehouse closed the upstream connection");
  t.equal((await send(`${gh.url}/v1/fine`)).status, 200, "the next request gets the one socket");
});

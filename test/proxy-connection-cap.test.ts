/**
 * The cap on open client connections (`max_connections`) through real sockets: at the cap the
 * connection idle the longest makes room, a new connection finds no room only when every open one
 * is busy, and a connection that never sent a byte is closed without an answer at the header
 * deadline.
 */
import type { Socket } from "node:net";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { open, splitResponses, untilClosed } from "./helpers/pipeline.js";
import type { RawResponse } from "./helpers/raw.js";
import { startUpstream } from "./helpers/upstream.js";

const ROUTES = `max_connections: 2
routes:
  - path: /v1/echo
    methods: [GET]
    auth: none
`;
const GET = "GET /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n";

/** Writes a request on a kept-alive connection and resolves with its response. */
function ask(socket: Socket, request: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer): void => {
      text += chunk.toString("latin1");
      const [response] = splitResponses(text);
      if (response === undefined) return;
      socket.off("data", onData);
      socket.off("close", onClose);
      resolve(response);
    };
    const onClose = (): void => reject(new Error("closed before the response"));
    socket.on("data", onData);
    socket.once("close", onClose);
    socket.write(request);
  });
}

// Upstream answers wait until released, so a test decides when a connection stops being busy.
const held: Array<() => void> = [];
let arrivals = 0;
let arrived: (() => void) | undefined;
const upstream = await startUpstream((_req, res) => {
  arrivals++;
  held.push(() => res.end("{}"));
  arrived?.();
});
/** Resolves once `count` requests are held at the upstream. */
async function untilHeld(count: number): Promise<void> {
  while (held.length < count) await new Promise<void>((done) => (arrived = done));
}
const release = (): void => {
  for (const answer of held.splice(0)) answer();
};

const gh = await startTestGatehouse(configFor(upstream.url, ROUTES), {
  clientTimeouts: { headersMs: 500 },
});
t.teardown(async () => {
  release();
  await gh.close();
  await upstream.close();
});

t.test("at the cap, the connection idle the longest is closed for a new one", async (t) => {
  const first = await open(gh.port);
  const firstClosed = untilClosed(first);
  const second = await open(gh.port);
  const asked = [ask(first, GET), ask(second, GET)];
  await untilHeld(2);
  release();
  const answers = await Promise.all(asked);
  t.same(
    answers.map((r) => r.status),
    [200, 200],
  );
  // The second connection was idle last: the first one makes room.
  const third = await open(gh.port);
  const answer = ask(third, GET);
  await untilHeld(1);
  release();
  t.equal((await answer).status, 200, "the new connection is served");
  t.equal(await firstClosed, answers[0]?.text, "the longest idle one was closed, nothing written");
  t.notOk(second.destroyed, "the other idle one stays open");
  second.destroy();
  third.destroy();
});

t.test("at the cap with every connection busy, a new one is closed unanswered", async (t) => {
  const before = arrivals;
  const busy = [await open(gh.port), await open(gh.port)];
  const asked = busy.map((socket) => ask(socket, GET));
  await untilHeld(2);
  const refused = await open(gh.port);
  const refusedText = untilClosed(refused);
  refused.write(GET);
  t.equal(await refusedText, "", "closed without a byte written");
  release();
  const answers = await Promise.all(asked);
  t.same(
    answers.map((r) => r.status),
    [200, 200],
    "the busy connections are served to the end",
  );
  t.equal(arrivals, before + 2, "the refused connection's request never reached the upstream");
  for (const socket of busy) socket.destroy();
});

t.test(
  "a connection that never sends a byte is closed at the header deadline, unanswered",
  async (t) => {
    const silent = await open(gh.port);
    t.equal(await untilClosed(silent), "", "no 408 written to it");
  },
);

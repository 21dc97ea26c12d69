/**
 * The socket fuzzer: random sequences of hostile clients on raw sockets, played at once against
 * one gatehouse with every kind of route in front of an upstream that misbehaves on request.
 * After each sequence the process has thrown nothing, a new connection gets /healthz, the open
 * descriptors are back to where they were (less the upstream connections pooled), RSS is within
 * 200 MB of idle, and no client received another's answer. docs/architecture.md tells how to
 * run it longer and how to replay a seed.
 */
import { strict as assert } from "node:assert";
import { readdirSync } from "node:fs";
import fc from "fast-check";
import t from "tap";
import { eventually, send } from "./helpers/client.js";
import { dpopKey, proof } from "./helpers/dpop.js";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { startHostileUpstream } from "./helpers/hostile-upstream.js";
import {
  drive,
  foreignMarkers,
  requestBytes,
  ROUTES_YAML,
  sequenceArb,
  type ConnectionSpec,
  type Credentials,
} from "./helpers/socket-fuzz.js";
import { clientsYaml, form, obtainToken, postToken } from "./helpers/tokens.js";

// gatehouse runs in this process: whatever it throws and nobody catches would end it. The guard
// keeps the process alive and turns the throw into the failing sequence's verdict.
const escaped: unknown[] = [];
const guard = (error: unknown): void => {
  escaped.push(error);
};
process.on("uncaughtException", guard);
t.teardown(() => {
  process.off("uncaughtException", guard);
});

const SECONDS = Number(process.env.GATEHOUSE_FUZZ_SECONDS ?? 35);
const RUNS = Number(process.env.GATEHOUSE_FUZZ_RUNS ?? Number.MAX_SAFE_INTEGER);
// Chosen here rather than by fast-check, so that a run cut short (a timeout) still names it.
const SEED = Number(process.env.GATEHOUSE_FUZZ_SEED ?? (Math.random() * 2 ** 31) | 0);
const PATH = process.env.GATEHOUSE_FUZZ_PATH;
const MB = 1024 * 1024;
// The longest a sequence's connections may take to close once its clients are gone: the longest
// deadline gatehouse keeps (5 s for a peer's close frame), widened for a busy machine.
const SETTLE_MS = 15_000;

const APP = { id: "fuzz-app", secret: "fuzz-app-secret-0123456789abcdef" };
const BOUND = {
  id: "fuzz-bound",
  secret: "fuzz-bound-secret-0123456789abcd",
  extra: ["dpop: required"],
};

const upstream = await startHostileUpstream();
const gh = await startTestGatehouse(
  `upstream:
  url: ${upstream.url}
  # An upstream that never answers holds a sequence this long.
  timeout: 1s
shutdown:
  grace: 2s
tokens:
  # Every refused token below comes from 127.0.0.1; refusals are what the fuzzer sends.
  failure_limit: { limit: 1000000, window: 1m }
${await clientsYaml([APP, BOUND])}${ROUTES_YAML}`,
);
t.teardown(async () => {
  await gh.close();
  await upstream.close();
});

const key = await dpopKey();
const boundAnswer = await postToken(gh.url, {
  headers: {
    dpop: await proof(key, {
      htm: "POST",
      htu: `${gh.url}/oauth/token`,
      iat: Math.floor(Date.now() / 1000),
    }),
  },
  body: form([
    ["grant_type", "client_credentials"],
    ["client_id", BOUND.id],
    ["client_secret", BOUND.secret],
  ]),
});
assert.equal(boundAnswer.status, 200, "the DPoP client got its token");
const credentials: Credentials = {
  client: APP,
  bearer: await obtainToken(gh.url, APP),
  bound: boundAnswer.json.access_token as string,
  key,
};

/** The descriptors this process holds open. */
const descriptors = (): number => readdirSync("/proc/self/fd").length;
// Each connection to the upstream is two descriptors here: gatehouse's end and the upstream's.
const beyondUpstream = (): number => descriptors() - 2 * upstream.open();

let sequence = 0;
const issued = new Set<string>();

/** Plays `connections` at once and returns what each received, with its marker. */
async function play(connections: readonly ConnectionSpec[]) {
  const id = ++sequence;
  const markers = connections.map((_, i) => `mk${id}x${i}k`);
  for (const marker of markers) issued.add(marker);
  const segments = await Promise.all(
    connections.map(async (connection, i) =>
      (
        await Promise.all(
          connection.requests.map((request, r) =>
            requestBytes(request, markers[i] as string, r, credentials),
          ),
        )
      ).flat(),
    ),
  );
  const received = await Promise.all(
    connections.map((connection, i) =>
      drive(gh.port, segments[i] as Buffer[], connection.pipelined, connection.cut),
    ),
  );
  return received.map((bytes, i) => ({ bytes, marker: markers[i] as string }));
}

// A warm-up of every route before the idle figures are taken, so what gatehouse opens once
// (its first upstream connection, its first WebSocket) is part of them.
await play(
  (["token", "bearer", "dpop", "open", "websocket", "open-websocket"] as const).map((route) => ({
    requests: [
      {
        route,
        method: "GET",
        credential: route === "dpop" ? "dpop" : "bearer",
        upgrade: route.endsWith("websocket") ? "websocket" : "none",
        body: { kind: "none" },
        behaviour: "answer",
        offset: 0,
        http10: false,
        close: false,
        expectContinue: false,
        frames: [],
      },
    ],
    pipelined: false,
    cut: { how: "fin", whileWriting: false, at: 1_000_000 },
  })),
);
assert.ok(await eventually(() => upstream.busy() === 0), "the warm-up's exchanges ended");
const idleDescriptors = beyondUpstream();
const idleRss = process.memoryUsage.rss();

/** Where a sequence starts from: what is open before it, less the upstream's idle connections. */
interface Start {
  readonly busy: number;
  readonly descriptors: number;
}

// Idle, unless a sequence before this one failed and left what it leaked: each sequence is
// judged on what it leaves itself, so a failure is shrunk to the sequence that causes it.
const startOf = (): Start => ({
  busy: upstream.busy(),
  descriptors: Math.max(idleDescriptors, beyondUpstream()),
});

/** Why the process is not back where `start` was, or undefined once it is. */
function unsettled(start: Start): string | undefined {
  const busy = upstream.busy() - start.busy;
  if (busy > 0) return `${busy} upstream connections still in use`;
  const held = beyondUpstream() - start.descriptors;
  if (held > 0) return `${held} descriptors more than idle, besides the upstream's connections`;
  return undefined;
}

let runs = 0;
let highestRss = idleRss;
// Clients that got an answer of the upstream with their own marker: the marker check has teeth.
let echoed = 0;

t.test(
  "no sequence of hostile clients and upstream answers ends the process, leaks or crosses answers",
  async (t) => {
    t.comment(`seed ${SEED}, for ${SECONDS} s`);
    await fc.assert(
      fc.asyncProperty(sequenceArb, async (connections) => {
        escaped.length = 0;
        const start = startOf();
        const answers = await play(connections);
        assert.equal((await send(`${gh.url}/healthz`)).status, 200, "a new connection is served");
        // What gatehouse still does for the sequence (a deadline, an upstream's late answer) may
        // throw too: the verdict waits until it is done.
        await eventually(() => unsettled(start) === undefined, SETTLE_MS);
        assert.deepEqual(
          escaped.map((error) => String((error as Error).stack ?? error)),
          [],
          "nothing was thrown that would have ended the process",
        );
        for (const { bytes, marker } of answers) {
          if (bytes.includes(marker)) echoed++;
          assert.deepEqual(
            foreignMarkers(bytes, marker, issued),
            [],
            `the client marked ${marker} received only its own answers`,
          );
        }
        assert.equal(unsettled(start), undefined, "every connection of the sequence is closed");
        highestRss = Math.max(highestRss, process.memoryUsage.rss());
        const grown = (process.memoryUsage.rss() - idleRss) / MB;
        assert.ok(grown < 200, `RSS grew by ${grown.toFixed(0)} MB over idle`);
        runs++;
      }),
      {
        numRuns: RUNS,
        seed: SEED,
        path: PATH,
        endOnFailure: PATH !== undefined,
        plugins: [fc.interruptAfterTimeLimit(SECONDS * 1000)],
      },
    );
    t.ok(runs >= 3, `the property held over ${runs} sequences`);
    t.ok(echoed > 0, `${echoed} clients received the upstream's answer to them`);
    // However many sequences ran, the process ends where it began: run for minutes, these are
    // the figures docs/operations.md quotes.
    t.ok(
      await eventually(() => upstream.busy() === 0 && beyondUpstream() <= idleDescriptors),
      "the descriptors are back to idle",
    );
    (globalThis as { gc?: () => void }).gc?.();
    t.comment(
      `descriptors: idle ${idleDescriptors}, at the end ${beyondUpstream()}; RSS: idle ` +
        `${(idleRss / MB).toFixed(1)} MB, highest after a sequence ${(highestRss / MB).toFixed(1)} MB, ` +
        `at the end ${(process.memoryUsage.rss() / MB).toFixed(1)} MB; heap at the end ` +
        `${(process.memoryUsage().heapUsed / MB).toFixed(1)} MB; ${runs} sequences`,
    );
  },
);

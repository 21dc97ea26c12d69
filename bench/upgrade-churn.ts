/**
 * `upgrade-churn`: one keep-alive connection sends 100,000 plain requests carrying `Upgrade: h2c`
 * to an `auth: none` route. Node's parser stops at each of them and hands the connection over at
 * its `upgrade` event; gatehouse gives it back to be served as plain HTTP, once per request. The
 * scenario reads gatehouse's RSS from /proc at the start and every 10,000 requests, and RSS and
 * heap after a full collection at 10,000 and at the end; then it closes that connection while a
 * second one sends /healthz back to back: the longest a probe waited from the close on is how long
 * the close held gatehouse's event loop, seen from outside.
 */
import { Agent, request } from "node:http";
import { connect, type Socket } from "node:net";
import {
  collectedHeap,
  COLLECTABLE,
  configHead,
  mb,
  NEVER_REACHED,
  OPEN_ROUTE,
  procMemory,
  startConfigured,
  type LimitsContext,
} from "./limits-kit.js";
import { figuresSection, type Section } from "./report.js";
import type { Shared } from "./shared.js";

/** Requests on the one connection. */
const UPGRADES = 100_000;
/** Requests after which RSS is taken as warmed up: the growth that counts is from there on. */
const WARM = 10_000;
/** Requests sent at once; the next batch goes once every answer to this one is in. */
const BATCH = 100;
/** Flat: RSS grows by less than this from the warm-up to the end. */
const FLAT_BYTES = 10e6;
/** The longest a probe may wait on the close. */
const CLOSE_GOAL_MS = 50;
/** How long the probes run before the close (for the machine's own latency), and after it. */
const BEFORE_CLOSE_MS = 1000;
const AFTER_CLOSE_MS = 2000;
/** How long a batch may go unanswered before the run stops. */
const BATCH_TIMEOUT_MS = 60_000;

/** A plain request that Node hands over at `upgrade`: RFC 7540 §3.2's upgrade to h2c. */
export function upgradeRequest(path: string): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: gatehouse.bench\r\nConnection: Upgrade, HTTP2-Settings\r\n` +
    "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
  );
}

// "HTTP/1.1 200 ": a status line's start, the part counted.
const STATUS_LINE = /HTTP\/1\.1 (\d{3}) /g;
const STATUS_LINE_LENGTH = 13;

/** Counts, by status, the responses on a connection, fed its bytes in whatever chunks arrive. */
export interface StatusCount {
  feed(chunk: string): void;
  readonly statuses: ReadonlyMap<number, number>;
  /** Every response counted so far. */
  total(): number;
}

/**
 * A count of status lines. The bodies here are the upstream's JSON and gatehouse's problem
 * documents, which never hold "HTTP/1.1 "; a status line cut by a chunk's end is counted with
 * the next chunk.
 */
export function statusCount(): StatusCount {
  const statuses = new Map<number, number>();
  let total = 0;
  let carry = "";
  return {
    statuses,
    total: () => total,
    feed(chunk) {
      const text = carry + chunk;
      let end = 0;
      for (const match of text.matchAll(STATUS_LINE)) {
        const status = Number(match[1]);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        total++;
        end = (match.index ?? 0) + STATUS_LINE_LENGTH;
      }
      carry = text.slice(Math.max(end, text.length - (STATUS_LINE_LENGTH - 1)));
    },
  };
}

/** The connection that carries the Upgrade requests. */
export interface Churn {
  /** Sends `count` requests in batches, each once the one before is answered. */
  send(count: number): Promise<void>;
  readonly answers: StatusCount;
  /** Ends the connection (a FIN) and resolves once it is closed. */
  close(): Promise<void>;
}

/** Opens the connection to 127.0.0.1:`port` whose requests carry `Upgrade: h2c`, to `path`. */
export async function openChurn(port: number, path: string): Promise<Churn> {
  const socket: Socket = connect(port, "127.0.0.1");
  await new Promise<void>((done, fail) => {
    socket.once("connect", () => done());
    socket.once("error", fail);
  });
  const answers = statusCount();
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const closed = new Promise<void>((done) => socket.once("close", () => done()));
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => {
    answers.feed(chunk);
    wake?.();
  });
  socket.on("error", (error) => (failure = error));
  void closed.then(() => wake?.());
  const batch = Buffer.from(upgradeRequest(path).repeat(BATCH), "latin1");
  const answered = (target: number): Promise<void> =>
    new Promise((done, fail) => {
      const timer = setTimeout(() => check(true), BATCH_TIMEOUT_MS);
      const check = (late = false): void => {
        if (answers.total() >= target) {
          clearTimeout(timer);
          wake = undefined;
          done();
        } else if (late || failure !== undefined || socket.destroyed) {
          clearTimeout(timer);
          wake = undefined;
          fail(
            new Error(
              `${answers.total()} of ${target} requests answered when the connection ` +
                (late ? `had waited ${BATCH_TIMEOUT_MS} ms` : `closed (${String(failure)})`),
            ),
          );
        }
      };
      wake = check;
      check();
    });
  return {
    answers,
    async send(count) {
      const start = answers.total();
      for (let sent = 0; sent < count; sent += BATCH) {
        const size = Math.min(BATCH, count - sent);
        socket.write(size === BATCH ? batch : batch.subarray(0, (batch.length / BATCH) * size));
        await answered(start + sent + size);
      }
    },
    close() {
      socket.end();
      return closed;
    },
  };
}

/** One probe: when it was sent and answered (performance.now()), and its status (0: an error). */
export interface Probe {
  readonly sent: number;
  readonly answered: number;
  readonly status: number;
}

/**
 * Sends GET `path` to 127.0.0.1:`port` on one keep-alive connection, each request once the one
 * before is answered, until `stop` resolves and the probe in flight is answered. A probe that
 * fails is counted with status 0, and the next one goes on a new connection.
 */
export async function probe(port: number, path: string, stop: Promise<void>): Promise<Probe[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let stopped = false;
  void stop.then(() => (stopped = true));
  const probes: Probe[] = [];
  try {
    while (!stopped) {
      const sent = performance.now();
      const status = await new Promise<number>((done) => {
        const req = request({ host: "127.0.0.1", port, path, agent }, (res) => {
          res.resume().once("end", () => done(res.statusCode ?? 0));
        });
        req.once("error", () => done(0)).end();
      });
      probes.push({ sent, answered: performance.now(), status });
    }
  } finally {
    agent.destroy();
  }
  return probes;
}

/** The longest wait of the probes answered after `from`; 0 when none was. */
export function longestFrom(probes: readonly Probe[], from: number): number {
  let longest = 0;
  for (const one of probes) {
    if (one.answered >= from) longest = Math.max(longest, one.answered - one.sent);
  }
  return longest;
}

function upgradeChurnConfig(listen: string, adminListen: string, context: LimitsContext): string {
  return `${configHead(listen, adminListen, context, [])}plans:
  anonymous:
    rate_limit: { limit: ${NEVER_REACHED}, window: 1h }
limits:
  store: memory
`;
}

const delay = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** Runs `upgrade-churn` in a gatehouse process of its own and returns its report. */
export async function measureUpgradeChurn(shared: Shared): Promise<Section> {
  const say = (text: string) => process.stderr.write(`upgrade-churn: ${text}\n`);
  const context = await shared.context();
  const admin = await startConfigured(
    "gatehouse upgrade-churn",
    context,
    (listen, adminListen) => upgradeChurnConfig(listen, adminListen, context),
    COLLECTABLE,
  );
  const { served } = admin;
  try {
    const port = Number(new URL(served.url).port);
    const rss = () => procMemory(served.pid, "VmRSS");
    const churn = await openChurn(port, OPEN_ROUTE);
    // RSS as it is every WARM requests; after a full collection at WARM and at the end, what is
    // still held: V8 frees its garbage when it chooses, so only those two compare alike.
    const series: number[] = [rss()];
    const collected: Array<{ rss: number; heap: number }> = [];
    let sendingMs = 0;
    for (let sent = 0; sent < UPGRADES; sent += WARM) {
      const began = performance.now();
      await churn.send(Math.min(WARM, UPGRADES - sent));
      sendingMs += performance.now() - began;
      series.push(rss());
      served.assertAlive();
      say(`${churn.answers.total()} answered, RSS ${mb(series[series.length - 1] as number)}`);
      if (sent === 0) collected.push({ heap: await collectedHeap(admin), rss: rss() });
    }
    collected.push({ heap: await collectedHeap(admin), rss: rss() });
    const seconds = sendingMs / 1000;
    const ok = churn.answers.statuses.get(200) ?? 0;
    // Probes before the close give the machine's own latency; those answered after it began
    // waited on whatever the close held the event loop for.
    let closing = Number.POSITIVE_INFINITY;
    const answered = await probe(
      port,
      "/healthz",
      (async () => {
        await delay(BEFORE_CLOSE_MS);
        closing = performance.now();
        await churn.close();
        await delay(AFTER_CLOSE_MS);
      })(),
    );
    served.assertAlive();
    const before = answered.filter((one) => one.answered < closing);
    const aroundClose = longestFrom(answered, closing);
    const [warm, end] = collected as [{ rss: number; heap: number }, { rss: number; heap: number }];
    const growth = end.rss - warm.rss;
    say(`closed: the longest probe waited ${aroundClose.toFixed(1)} ms`);
    const verdict = (pass: boolean) => (pass ? "pass" : "FAIL");
    const k = (count: number) => `${count / 1000}k`;
    return figuresSection("upgrade-churn", [
      ["Node", process.version],
      [
        "requests with Upgrade: h2c on one connection, answered 200",
        `${ok} of ${UPGRADES} (${seconds.toFixed(1)} s, ${(UPGRADES / seconds).toFixed(0)} req/s)`,
      ],
      [
        `RSS at the start, after ${k(WARM)}, at the end`,
        `${mb(series[0] as number)}, ${mb(series[1] as number)}, ${mb(series[series.length - 1] as number)}`,
      ],
      [`RSS every ${k(WARM)} requests`, series.map((bytes) => mb(bytes)).join(", ")],
      [
        `after a full collection, at ${k(WARM)} and at the end: RSS; heap in use`,
        `${mb(warm.rss)} → ${mb(end.rss)}; ${mb(warm.heap)} → ${mb(end.heap)}`,
      ],
      [
        `RSS growth from ${k(WARM)} on, after full collections (flat: under ${mb(FLAT_BYTES)})`,
        `${mb(growth)}: ${verdict(growth < FLAT_BYTES)}`,
      ],
      [
        `heap kept per request from ${k(WARM)} on`,
        `${((end.heap - warm.heap) / (UPGRADES - WARM)).toFixed(0)} B`,
      ],
      [
        `longest /healthz wait from the close on (goal: under ${CLOSE_GOAL_MS} ms)`,
        `${aroundClose.toFixed(1)} ms: ${verdict(aroundClose < CLOSE_GOAL_MS)}`,
      ],
      [
        `longest /healthz wait in the ${BEFORE_CLOSE_MS / 1000} s before it`,
        `${longestFrom(before, Number.NEGATIVE_INFINITY).toFixed(1)} ms (${before.length} probes)`,
      ],
      [
        "probes not answered 200 (reset or refused)",
        String(answered.filter((one) => one.status !== 200).length),
      ],
    ]);
  } finally {
    await served.stop();
  }
}

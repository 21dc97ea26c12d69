/**
 * `keys`: what a tracked client costs in the memory store. In a process of its own with
 * `--expose-gc`, the store's heap bytes and CPU per new key for 100k distinct clients; then
 * through a running gatehouse, 100k distinct anonymous clients (distinct X-Forwarded-For from a
 * trusted 127.0.0.1): its CPU per request for new clients against one returning client, its peak
 * RSS while they are all tracked, and its RSS and heap a window after they all ended.
 */
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { processCpuNs } from "./cpu.js";
import { clientAddress, drive } from "./drive.js";
import type { KeysProbe } from "./keys-probe.js";
import {
  collectedHeap,
  COLLECTABLE,
  configHead,
  mb,
  metric,
  OPEN_ROUTE,
  procMemory,
  startConfigured,
  table,
  type Admin,
  type LimitsContext,
} from "./limits-kit.js";

const PROBE = fileURLToPath(new URL("./keys-probe.js", import.meta.url));
const CLIENTS = 100_000;
const RETURNING = 20_000;
// The shortest window; a slow machine gets a longer one, so that the first client's counter still
// holds when the last of the 100k is sent (checked).
const MIN_WINDOW_S = 60;
const RELOADED = 'gatehouse_config_reloads_total{result="success"}';
const RELOAD_TIMEOUT_MS = 30_000;
const LIMIT = 1_000_000_000;
const RETURNING_CLIENT = "198.51.100.1";
// The sweep runs every second; this leaves it time for two passes after the last counter ended.
const SWEEP_MARGIN_MS = 3000;
// What rate-limiter-flexible's memory storage cost in the same in-process measurement.
const BEFORE = { bytesPerKey: 445, cpuUsPerKey: 3.4 };

function keysConfig(
  listen: string,
  adminListen: string,
  context: LimitsContext,
  windowS: number,
): string {
  return `${configHead(listen, adminListen, context, ["127.0.0.1/32"])}plans:
  anonymous:
    rate_limit: { limit: ${LIMIT}, window: ${windowS}s }
limits:
  store: memory
`;
}

async function probeStore(): Promise<KeysProbe> {
  const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", PROBE]);
  return JSON.parse(stdout.trim()) as KeysProbe;
}

interface Through {
  readonly windowS: number;
  readonly rssBefore: number;
  readonly heapBefore: number;
  readonly cpuUsReturning: number;
  readonly cpuUsNew: number;
  readonly loadS: number;
  readonly allTracked: boolean;
  readonly rssPeak: number;
  readonly heapPeak: number;
  readonly rssAfter: number;
  readonly heapAfter: number;
  readonly rssAfterCollection: number;
  readonly faults: number;
}

function xff(address: string): Record<string, string> {
  return { "x-forwarded-for": address };
}

// Sends `count` requests and returns gatehouse's CPU µs per request and the non-200 answers.
async function measured(
  admin: Admin,
  context: LimitsContext,
  count: number,
  headersFor: (i: number) => Record<string, string>,
) {
  const before = processCpuNs(admin.served.pid);
  const driven = await drive(
    [admin.served.url + OPEN_ROUTE],
    count,
    context.load.connections,
    headersFor,
  );
  const cpuUs = (processCpuNs(admin.served.pid) - before) / 1000 / count;
  return { cpuUs, faults: count - (driven.statuses.get(200) ?? 0), ms: driven.ms };
}

/** Rewrites the window in gatehouse's config and waits for the reload to succeed. */
async function reloadWindow(admin: Admin, windowS: number): Promise<void> {
  const reloads = await metric(admin, RELOADED);
  const config = await readFile(admin.configPath, "utf8");
  await writeFile(admin.configPath, config.replace(/window: \d+s/, `window: ${windowS}s`));
  process.kill(admin.served.pid, "SIGHUP");
  const deadline = Date.now() + RELOAD_TIMEOUT_MS;
  while (!((await metric(admin, RELOADED)) > (Number.isNaN(reloads) ? 0 : reloads))) {
    admin.served.assertAlive();
    if (Date.now() > deadline)
      throw new Error(`gatehouse did not reload the window of ${windowS} s`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

async function throughGatehouse(context: LimitsContext): Promise<Through> {
  const admin = await startConfigured(
    "gatehouse keys",
    context,
    (listen, adminListen) => keysConfig(listen, adminListen, context, MIN_WINDOW_S),
    COLLECTABLE,
  );
  try {
    const { pid } = admin.served;
    // Warm-up: the JIT compiles the request path before anything is measured; how long it takes
    // tells how long the 100k will (new clients cost more: twice the estimate).
    const warm = await drive(
      [admin.served.url + OPEN_ROUTE],
      RETURNING,
      context.load.connections,
      () => xff(RETURNING_CLIENT),
    );
    const windowS = Math.max(MIN_WINDOW_S, Math.ceil((2 * warm.ms * (CLIENTS / RETURNING)) / 1000));
    if (windowS > MIN_WINDOW_S) await reloadWindow(admin, windowS);
    const rssBefore = procMemory(pid, "VmRSS");
    const heapBefore = await collectedHeap(admin);
    const returning = await measured(admin, context, RETURNING, () => xff(RETURNING_CLIENT));
    const fresh = await measured(admin, context, CLIENTS, (i) => xff(clientAddress(10, i)));
    const lastSent = Date.now();
    // The first new client's second request: its counter still holds its first, so every one
    // of the 100k was tracked at the same time.
    const again = await fetch(admin.served.url + OPEN_ROUTE, {
      headers: xff(clientAddress(10, 0)),
    });
    await again.arrayBuffer();
    const allTracked = again.headers.get("x-ratelimit-remaining") === String(LIMIT - 2);
    const rssPeak = procMemory(pid, "VmHWM");
    const heapPeak = await collectedHeap(admin);
    // A window after the last counter ended, with a trickle of requests as in service.
    while (Date.now() < lastSent + windowS * 1000 + SWEEP_MARGIN_MS) {
      await drive([admin.served.url + OPEN_ROUTE], 20, 1, () => xff(RETURNING_CLIENT));
      await new Promise((done) => setTimeout(done, 100));
    }
    const rssAfter = procMemory(pid, "VmRSS");
    return {
      windowS,
      rssBefore,
      heapBefore,
      cpuUsReturning: returning.cpuUs,
      cpuUsNew: fresh.cpuUs,
      loadS: fresh.ms / 1000,
      allTracked,
      rssPeak,
      heapPeak,
      rssAfter,
      heapAfter: await collectedHeap(admin),
      rssAfterCollection: procMemory(pid, "VmRSS"),
      faults: returning.faults + fresh.faults,
    };
  } finally {
    await admin.served.stop();
  }
}

/** Runs `keys` and returns its Markdown section. */
export async function measureKeys(context: LimitsContext): Promise<string> {
  const say = (text: string) => process.stderr.write(`keys: ${text}\n`);
  say("measuring the memory store in a process of its own");
  const store = await probeStore();
  say(
    `${store.bytesPerKey.toFixed(0)} B/key, ${store.cpuUsPerKey.toFixed(2)} µs/key, ` +
      `${store.bytesPerKeyAfterExpiry.toFixed(1)} B/key after expiry`,
  );
  say(`${CLIENTS} distinct clients through gatehouse, then a window's wait`);
  const through = await throughGatehouse(context);
  const given = (through.rssPeak - through.rssAfter) / (through.rssPeak - through.rssBefore);
  say(`peak RSS ${mb(through.rssPeak)}, ${mb(through.rssAfter)} a window after expiry`);
  const storeTable = table(
    ["memory store, 100k keys", "heap B/key", "CPU µs/key", "heap B/key after expiry"],
    [
      [
        "rate-limiter-flexible (before)",
        String(BEFORE.bytesPerKey),
        BEFORE.cpuUsPerKey.toFixed(1),
        "",
      ],
      [
        "gatehouse's own (now)",
        store.bytesPerKey.toFixed(0),
        store.cpuUsPerKey.toFixed(2),
        store.bytesPerKeyAfterExpiry.toFixed(1),
      ],
    ],
  );
  const processTable = table(
    ["through gatehouse", "value"],
    [
      ["CPU µs/request, one returning client", through.cpuUsReturning.toFixed(1)],
      ["CPU µs/request, 100k new clients", through.cpuUsNew.toFixed(1)],
      ["time to send the 100k", `${through.loadS.toFixed(1)} s`],
      ["all 100k tracked at once", through.allTracked ? "yes" : "no (the window ended first)"],
      ["RSS before the 100k", mb(through.rssBefore)],
      ["peak RSS (VmHWM)", mb(through.rssPeak)],
      ["RSS a window after they all ended", mb(through.rssAfter)],
      ["the same, after a full garbage collection", mb(through.rssAfterCollection)],
      [
        "share of the growth given back (without a forced collection)",
        `${(given * 100).toFixed(0)}%`,
      ],
      [
        "heap in use after a full collection: before, at the peak, after",
        [through.heapBefore, through.heapPeak, through.heapAfter].map(mb).join(", "),
      ],
      [
        "heap B per tracked client (peak − before)",
        ((through.heapPeak - through.heapBefore) / CLIENTS).toFixed(0),
      ],
      ["non-200 answers", String(through.faults)],
    ],
  );
  return [
    "## keys",
    "",
    `The memory store's cost per tracked client (median of ${store.repetitions} runs of ${store.keys} new keys, after one unmeasured run):`,
    "",
    storeTable,
    "",
    `${CLIENTS} distinct anonymous clients through one gatehouse process (rate limit window ${through.windowS} s):`,
    "",
    processTable,
    "",
  ].join("\n");
}

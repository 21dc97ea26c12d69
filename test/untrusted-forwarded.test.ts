/**
 * X-Forwarded-For or Forwarded from a peer not in `trusted_proxies`: its hops are not believed,
 * so every client behind it shares one address for the limits. Such requests are counted in
 * gatehouse_untrusted_forwarded_total, and each peer is named in one warning per process (a
 * reload does not repeat it) telling the operator to set `trusted_proxies`; at most a fixed
 * number of addresses are warned about, then one line says the rest are only counted. Through
 * real sockets, from several loopback addresses (127.0.0.0/8 all reach this host).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter } from "prom-client";
import t from "tap";
import { createUntrustedForwarded } from "../src/http/untrusted-forwarded.js";
import { peerAddress } from "../src/http/client-ip.js";
import { send } from "./helpers/client.js";
import { configFor, memoryLogger, startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const COUNTER = "gatehouse_untrusted_forwarded_total";
const WARNING = /is not in trusted_proxies.*add its address range to trusted_proxies$/;

const config = (trusted: string) => configFor(upstream.url, `trusted_proxies: ${trusted}\n`);

t.test("counted per request, warned about once per address", async (t) => {
  const g = await startTestGatehouse(config("[]"));
  t.teardown(() => g.close());
  const health = (from: string, headers: Record<string, string> = {}) =>
    send(`${g.url}/healthz`, { localAddress: from, headers });
  const warnings = () =>
    g.logs.filter((line) => line.level === "warn" && WARNING.test(String(line.msg)));

  t.equal((await health("127.0.0.1")).status, 200);
  t.equal(await metric(g, COUNTER), 0, "no forwarding header: not counted");
  for (let i = 0; i < 3; i++) {
    await health("127.0.0.1", { "x-forwarded-for": `203.0.113.${i}` });
  }
  await health("127.0.0.1", { forwarded: "for=203.0.113.9" });
  t.equal(await metric(g, COUNTER), 4, "each request with X-Forwarded-For or Forwarded");
  t.equal(warnings().length, 1, "one warning");
  t.match(warnings(), [{ address: "127.0.0.1", header: "X-Forwarded-For" }]);
  t.match(String(warnings()[0]?.msg), /^requests from 127\.0\.0\.1 carry X-Forwarded-For but/);

  await health("127.0.0.2", { forwarded: "for=203.0.113.9" });
  t.equal(await metric(g, COUNTER), 5);
  t.equal(warnings().length, 2, "one for the new address");
  t.match(warnings(), [{ address: "127.0.0.1" }, { address: "127.0.0.2", header: "Forwarded" }]);

  // Another address is trusted: 127.0.0.1 is still not, and was warned about in this process.
  await g.writeConfig(config("[10.0.0.0/8]"));
  t.equal(await g.gatehouse.reload(), "success");
  await health("127.0.0.1", { "x-forwarded-for": "203.0.113.1" });
  t.equal(await metric(g, COUNTER), 6, "counted after the reload too");
  t.equal(warnings().length, 2, "not warned about again");

  // Now trusted: its hops are believed, and neither counted nor warned about.
  await g.writeConfig(config("[127.0.0.1/32]"));
  t.equal(await g.gatehouse.reload(), "success");
  await health("127.0.0.1", { "x-forwarded-for": "203.0.113.1" });
  t.equal(await metric(g, COUNTER), 6, "a trusted proxy's request is not counted");
  await health("127.0.0.3", { "x-forwarded-for": "203.0.113.1" });
  t.equal(await metric(g, COUNTER), 7, "an untrusted peer's still is");
  t.equal(warnings().length, 3);
});

t.test("the addresses warned about are capped; the rest are counted", async (t) => {
  const { log, logs } = memoryLogger();
  const counter = new Counter({ name: COUNTER, help: "requests", registers: [] });
  const untrusted = createUntrustedForwarded(log, counter, 2);
  const server = createServer((req, res) => {
    untrusted.check(req, peerAddress(req));
    res.end();
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  t.teardown(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  for (const from of ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.1"]) {
    await send(url, { localAddress: from, headers: { "x-forwarded-for": "203.0.113.1" } });
  }
  t.equal((await counter.get()).values[0]?.value, 5, "every request counted");
  const warned = logs.filter((line) => line.level === "warn");
  t.match(warned, [
    { address: "127.0.0.1" },
    { address: "127.0.0.2" },
    { warned: 2, msg: /^forwarding headers came from more than 2 addresses/ },
  ]);
  t.equal(warned.length, 3, "after the cap, one line and then none");
});

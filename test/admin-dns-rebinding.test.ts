/**
 * The admin listener answers only a `Host` that names it: an IP literal, localhost, or a name in
 * `admin_hosts`. A web page that rebinds its own name to 127.0.0.1 still sends that name, so it
 * gets 421 on every endpoint and changes nothing. Through real sockets.
 */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { anonymousOpenRoute, configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `admin_hosts: [gatehouse.internal]
plans:
${anonymousOpenRoute(5)}`,
  ),
);
t.teardown(() => g.close());
const port = g.gatehouse.adminAddress.port;

function admin(path: string, host: string, method = "GET") {
  return send(`${g.adminUrl}${path}`, { method, headers: { host } });
}

async function remaining(): Promise<unknown> {
  const answer = await admin("/limits/addresses/127.0.0.1", `127.0.0.1:${port}`);
  return (json(answer).limits as Array<{ remaining: number }>)[0]?.remaining;
}

t.test("a foreign Host gets 421 on every endpoint and resets nothing", async (t) => {
  t.equal((await fetch(`${g.url}/open`)).status, 200);
  t.equal(await remaining(), 4, "one request counted");
  for (const [method, path] of [
    ["GET", "/config"],
    ["GET", "/metrics"],
    ["GET", "/version"],
    ["GET", "/limits/addresses/127.0.0.1"],
    ["DELETE", "/limits/addresses/127.0.0.1"],
    ["GET", "/no-such-path"],
  ] as const) {
    for (const host of ["attacker.example", `attacker.example:${port}`, "127.0.0.1.nip.io"]) {
      const answer = await admin(path, host, method);
      t.equal(answer.status, 421, `${method} ${path} with Host ${host}`);
      t.equal(json(answer).error, "misdirected_request");
    }
  }
  t.equal(await remaining(), 4, "the refused DELETE reset nothing");
  t.notOk(
    g.logs.some((line) => line.msg === "admin reset limits"),
    "and logged no reset",
  );
});

t.test("IP literals, localhost and admin_hosts in any case are answered", async (t) => {
  for (const host of [
    `127.0.0.1:${port}`,
    "127.0.0.1",
    `[::1]:${port}`,
    "[::1]",
    "localhost",
    `LocalHost:${port}`,
    "gatehouse.internal",
    `GateHouse.Internal:${port}`,
  ]) {
    t.equal((await admin("/config", host)).status, 200, host);
  }
});

t.test("names that only look allowed get 421", async (t) => {
  for (const host of ["::1", "[gatehouse.internal]", "localhost.attacker.example", "gatehouse"]) {
    t.equal((await admin("/version", host)).status, 421, host);
  }
});

t.test("a request without Host: 400 in HTTP/1.1, 421 in HTTP/1.0", async (t) => {
  const v11 = await rawRequest(port, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
  t.equal(v11.status, 400);
  t.match(v11.body, /"error":"invalid_request"/);
  const v10 = await rawRequest(port, "GET /metrics HTTP/1.0\r\n\r\n");
  t.equal(v10.status, 421);
  t.equal(JSON.parse(v10.body).error, "misdirected_request");
});

t.test("two Host lines are 400, whichever comes first", async (t) => {
  for (const hosts of [
    "Host: 127.0.0.1\r\nHost: attacker.example",
    "Host: attacker.example\r\nHost: 127.0.0.1",
  ]) {
    const answer = await rawRequest(
      port,
      `DELETE /limits/addresses/127.0.0.1 HTTP/1.1\r\n${hosts}\r\nConnection: close\r\n\r\n`,
    );
    t.equal(answer.status, 400, hosts);
    t.match(answer.body, /"error":"invalid_request"/);
  }
});

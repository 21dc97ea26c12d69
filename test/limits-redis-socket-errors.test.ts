// A TLS connection to Redis that fails after its handshake: the peer's record is garbage (a TLS
// error), then the connection is reset (a second error on the same socket). ioredis listens to
// its socket only once, so without a listener of gatehouse's own the reset ended the process.
import { EventEmitter, once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { Redis } from "ioredis";
import { pino } from "pino";
import t from "tap";
import { connectRedis } from "../src/limits/redis-connection.js";
import { createMetrics } from "../src/metrics.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { refusingPort } from "./helpers/ports.js";
import { makeCertificates } from "./helpers/redis-tls.js";
import { serverSettings, startTestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

t.test("a TLS fault then a reset on one socket is an outage, not a crash", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-tls-fault-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const certs = await makeCertificates(dir, { ip: true });
  const uncaught: Error[] = [];
  const record = (error: Error): void => void uncaught.push(error);
  process.on("uncaughtException", record);
  t.teardown(() => process.off("uncaughtException", record));

  // The client side of the relay, found by the relay's port towards the TLS server.
  const clients = new Map<number, Socket>();
  // Every socket of the servers, destroyed at the end so that nothing keeps the test alive.
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const server = createTlsServer({
    key: await readFile(certs.keyFile),
    cert: await readFile(certs.certFile),
  });
  // The first command after the handshake is answered with bytes that are no TLS record.
  server.on("connection", track);
  server.on("secureConnection", (socket) => {
    socket.on("error", () => undefined);
    socket.once("data", () => clients.get(socket.remotePort ?? 0)?.write("garbage\r\n"));
  });
  const serverPort = await refusingPort();
  server.listen(serverPort, "127.0.0.1");
  await once(server, "listening");
  // A plain TCP relay in front of the server, so that the test can reset the client's socket.
  const relay = createServer((client) => {
    track(client);
    client.on("error", () => undefined);
    const toServer = connect(serverPort, "127.0.0.1", () =>
      clients.set(toServer.localPort ?? 0, client),
    );
    track(toServer);
    toServer.on("error", () => undefined);
    client.pipe(toServer);
    toServer.on("data", (data: Buffer) => client.destroyed || client.write(data));
  });
  const relayPort = await refusingPort();
  relay.listen(relayPort, "127.0.0.1");
  await once(relay, "listening");

  const metrics = createMetrics();
  const connection = connectRedis(
    serverSettings(`rediss://127.0.0.1:${relayPort}`, {
      tls: { ca: certs.ca, servername: undefined },
      timeoutMs: 1000,
    }),
    { log: pino({ level: "silent" }), metrics },
  );
  t.teardown(async () => {
    await connection.close();
    for (const socket of sockets) socket.destroy();
    await Promise.all([
      new Promise((done) => server.close(done)),
      new Promise((done) => relay.close(done)),
    ]);
  });
  const [tlsError] = (await once(connection.client, "error")) as [Error];
  t.match(tlsError.message, /SSL|TLS/, "the garbage is a TLS error");
  // Then the connection is reset: the same socket reports a second error.
  for (const client of clients.values()) client.resetAndDestroy();
  await once(connection.client, "close");
  t.same(uncaught, [], "no error escaped to the process");
  t.equal(connection.healthy(), false, "the connection counts as down");
});

// The store hears other replicas' resets on a subscriber connection of its own. ioredis, left to
// itself, subscribes again on every reconnection with a promise nobody awaits: a connection lost
// during that SUBSCRIBE rejected it unhandled, which ends a Node process.
t.test(
  "a subscriber connection lost while subscribing again is an outage, not a crash",
  async (t) => {
    const rejected: unknown[] = [];
    const record = (reason: unknown): void => void rejected.push(reason);
    process.on("unhandledRejection", record);
    t.teardown(() => process.off("unhandledRejection", record));
    const redis = await startTestRedis();
    t.teardown(() => redis.close());
    const upstream = await startUpstream();
    t.teardown(() => upstream.close());

    // A relay to the server that reports each SUBSCRIBE answered, and can drop the next one sent.
    const sockets = new Set<Socket>();
    const relayEvents = new EventEmitter();
    let dropNextSubscribe = false;
    const relay = createServer((client) => {
      const toServer = connect(redis.port, "127.0.0.1");
      for (const socket of [client, toServer]) {
        sockets.add(socket);
        socket.on("error", () => undefined);
        socket.once("close", () => sockets.delete(socket));
      }
      client.on("close", () => toServer.destroy());
      toServer.on("close", () => client.destroy());
      client.on("data", (data: Buffer) => {
        if (dropNextSubscribe && /subscribe/i.test(data.toString("latin1"))) {
          dropNextSubscribe = false;
          client.destroy();
          relayEvents.emit("dropped");
          return;
        }
        toServer.write(data);
      });
      toServer.on("data", (data: Buffer) => {
        client.write(data);
        if (/subscribe/i.test(data.toString("latin1"))) relayEvents.emit("subscribed");
      });
    });
    const relayPort = await refusingPort();
    relay.listen(relayPort, "127.0.0.1");
    await once(relay, "listening");
    t.teardown(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((done) => relay.close(done));
    });
    const subscribed = once(relayEvents, "subscribed");
    const g = await startTestGatehouse(
      configFor(
        upstream.url,
        `limits:\n  store: redis\n  redis:\n    url: redis://127.0.0.1:${relayPort}\n    key_prefix: "t:"\n`,
      ),
    );
    t.teardown(() => g.close());
    await subscribed;

    // Every connection is lost; the subscriber's first SUBSCRIBE after reconnecting is lost too.
    dropNextSubscribe = true;
    const dropped = once(relayEvents, "dropped");
    for (const socket of sockets) socket.destroy();
    await dropped;
    await once(relayEvents, "subscribed");

    t.same(rejected, [], "no promise was left to reject unhandled");
    const direct = new Redis(redis.url);
    t.teardown(() => direct.quit());
    t.strictSame(
      await direct.call("PUBSUB", "NUMSUB", "t:resets"),
      ["t:resets", 1],
      "subscribed again, once",
    );
  },
);

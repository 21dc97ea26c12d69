// A TLS connection to Redis that fails after its handshake: the peer's record is garbage (a TLS
// error), then the connection is reset (a second error on the same socket). ioredis listens to
// its socket only once, so without a listener of gatehouse's own the reset ended the process.
import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { pino } from "pino";
import t from "tap";
import { connectRedis } from "../src/limits/redis-connection.js";
import { createMetrics } from "../src/metrics.js";
import { refusingPort } from "./helpers/ports.js";
import { makeCertificates } from "./helpers/redis-tls.js";
import { serverSettings } from "./helpers/redis.js";

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

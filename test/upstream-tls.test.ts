/**
 * An https upstream, through the built command: gatehouse verifies the upstream's certificate
 * against Node's trusted CAs (NODE_EXTRA_CA_CERTS adds one), names the host in SNI and Host,
 * answers 502 when the certificate is not trusted, resumes TLS sessions on new connections, and
 * checks `upstream.server_name` when the URL names an address.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import t from "tap";
import { startCli, type CliProcess } from "./helpers/cli.js";
import { eventually, json, send } from "./helpers/client.js";
import { makeCertificates } from "./helpers/redis-tls.js";

// Two processes start here, each in seconds on a loaded machine.
t.setTimeout(240_000);

/** What the upstream saw of one request. */
interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, unknown>;
  /** The name the client asked for in SNI; false or null when it sent none. */
  readonly servername: string | false | null;
}

const dir = await mkdtemp(join(tmpdir(), "gatehouse-upstream-tls-"));
const children: CliProcess[] = [];
t.teardown(async () => {
  for (const cli of children) if (cli.child.exitCode === null) await cli.stop("SIGKILL");
  await rm(dir, { recursive: true, force: true });
});

const certs = await makeCertificates(dir, { ip: true, name: "localhost" });
const seen: Seen[] = [];
const upstream: Server = createServer(
  { key: await readFile(certs.keyFile), cert: await readFile(certs.certFile) },
  (req, res) => {
    const answer: Seen = {
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      servername: (req.socket as TLSSocket).servername,
    };
    seen.push(answer);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(answer));
  },
);
await new Promise<void>((done) => upstream.listen(0, "127.0.0.1", done));
t.teardown(async () => {
  upstream.closeAllConnections();
  await new Promise((done) => upstream.close(done));
});
const { port } = upstream.address() as AddressInfo;

/**
 * Starts the built command with `env` in front of `upstream` (https://localhost:PORT unless
 * given, with `more` upstream keys).
 */
async function gatehouse(
  name: string,
  env: NodeJS.ProcessEnv,
  upstream = `url: https://localhost:${port}`,
): Promise<CliProcess> {
  const config = join(dir, `${name}.yaml`);
  await writeFile(
    config,
    `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  ${upstream}
routes:
  - path: /v1/**
    methods: [GET, POST]
    auth: none
`,
  );
  const cli = await startCli(["--config", config], env);
  children.push(cli);
  return cli;
}

t.test("with the upstream's CA trusted, requests reach it over TLS", async (t) => {
  const cli = await gatehouse("trusted", { NODE_EXTRA_CA_CERTS: certs.caFile });
  const res = await send(`${cli.url}/v1/items?page=2`, { headers: { "x-test": "tls" } });
  t.equal(res.status, 200);
  const answer = json(res) as unknown as Seen;
  t.equal(answer.method, "GET");
  t.equal(answer.path, "/v1/items?page=2");
  t.equal(answer.headers.host, `localhost:${port}`, "Host is the upstream's authority");
  t.equal(answer.headers["x-test"], "tls");
  t.equal(answer.servername, "localhost", "SNI names the upstream's host");

  const posted = await send(`${cli.url}/v1/items`, { method: "POST", body: "payload" });
  t.equal(posted.status, 200);
  t.match(json(posted), { method: "POST", headers: { "content-length": "7" } });
});

t.test("without the CA, the certificate is not trusted: 502 bad_gateway", async (t) => {
  // Unset rather than inherited, whatever this process was started with.
  const cli = await gatehouse("untrusted", { NODE_EXTRA_CA_CERTS: undefined });
  const before = seen.length;
  const res = await send(`${cli.url}/v1/items`);
  t.equal(res.status, 502);
  t.match(json(res), { error: "bad_gateway", message: String });
  t.equal(seen.length, before, "no request reached the upstream");
  const failed = await cli.line((line) => line.msg === "upstream failed");
  t.match(
    failed,
    { reason: "tls", err: { code: /CERT|ISSUER|SIGNATURE/ } },
    "the handshake refused it",
  );
});

t.test("a new connection resumes the TLS session of an earlier one", async (t) => {
  const connections: TLSSocket[] = [];
  const resumed: boolean[] = [];
  const onConnection = (socket: TLSSocket) => {
    connections.push(socket);
    resumed.push(socket.isSessionReused());
  };
  upstream.on("secureConnection", onConnection);
  t.teardown(() => void upstream.off("secureConnection", onConnection));
  // Connections idle for 200 ms close, so the second request needs a connection of its own.
  const cli = await gatehouse(
    "resumed",
    { NODE_EXTRA_CA_CERTS: certs.caFile },
    `url: https://localhost:${port}\n  idle_timeout: 200ms`,
  );
  t.equal((await send(`${cli.url}/v1/first`)).status, 200);
  const [first] = connections;
  t.ok(await eventually(async () => first?.destroyed === true), "the idle connection closed");
  t.equal((await send(`${cli.url}/v1/second`)).status, 200);
  t.equal(connections.length, 2, "on a new connection");
  t.same(resumed, [false, true], "a full handshake, then a resumed session");
});

t.test("server_name names the certificate of an upstream reached by address", async (t) => {
  // A certificate for upstream.test alone, from a CA of its own.
  const named = await makeCertificates(await mkdtemp(join(dir, "named-")), {
    ip: false,
    name: "upstream.test",
  });
  const names: Array<string | false | null> = [];
  const server: Server = createServer(
    { key: await readFile(named.keyFile), cert: await readFile(named.certFile) },
    (req, res) => {
      names.push((req.socket as TLSSocket).servername);
      res.end("named");
    },
  );
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });
  const address = `url: https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const env = { NODE_EXTRA_CA_CERTS: named.caFile };

  const withName = await gatehouse("named", env, `${address}\n  server_name: upstream.test`);
  const res = await send(`${withName.url}/v1/items`);
  t.equal(res.status, 200);
  t.equal(res.body.toString(), "named");
  t.same(names, ["upstream.test"], "SNI carries server_name");

  const without = await gatehouse("unnamed", env, address);
  const refused = await send(`${without.url}/v1/items`);
  t.equal(refused.status, 502, "the certificate does not name 127.0.0.1");
  t.equal(names.length, 1, "nothing reached the upstream");
  const failed = await without.line((line) => line.msg === "upstream failed");
  t.match(failed, { reason: "tls" });
});

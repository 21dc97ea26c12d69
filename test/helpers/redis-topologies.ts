/**
 * The Redis deployments production runs, started by the test from the machine's redis-server and
 * redis-cli on ports of the test's own: a 3-primary Cluster, a primary with a replica behind
 * three Sentinels, an ACL user with a password, and TLS with a CA the test makes with openssl.
 * Each lives in a temporary folder that `close()` removes.
 */
import { execFile, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { promisify } from "node:util";
import { refusingPort } from "./ports.js";
import { answers, launchRedis, serverArgs, startTestRedis, stopProcess } from "./redis.js";

const run = promisify(execFile);

/** Runs `redis-cli ARGS` against 127.0.0.1:`port` and returns what it printed. */
export async function cli(port: number, args: readonly string[], password?: string) {
  const auth = password === undefined ? [] : ["-a", password, "--no-auth-warning"];
  const { stdout } = await run("redis-cli", [
    "-h",
    "127.0.0.1",
    "-p",
    String(port),
    ...auth,
    ...args,
  ]);
  return stdout.trim();
}

/** Polls `probe` until it holds; throws naming `what` after `deadlineMs`. */
async function until(what: string, probe: () => Promise<boolean>, deadlineMs = 30_000) {
  const end = Date.now() + deadlineMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > end) throw new Error(`${what}: not within ${deadlineMs} ms`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

/** `count` distinct ports that nothing listens on. */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await refusingPort());
  return [...ports];
}

/** A field of a `redis-cli` reply printed as alternating name and value lines. */
function field(reply: string, name: string): string | undefined {
  const lines = reply.split("\n");
  const at = lines.indexOf(name);
  return at < 0 || at % 2 === 1 ? undefined : lines[at + 1];
}

/** A server started by a helper: restarted with the same arguments, stopped at close. */
interface Member {
  readonly port: number;
  readonly args: readonly string[];
  child: ChildProcess;
}

async function member(port: number, args: readonly string[]): Promise<Member> {
  return { port, args, child: await launchRedis(args, () => answers(port)) };
}

/** A 3-primary Redis Cluster. */
export interface TestCluster {
  readonly ports: readonly number[];
  /** The seed nodes, as `limits.redis.cluster` lists them. */
  readonly seeds: readonly string[];
  /** The keys starting with `prefix`, with the port of the primary holding each. */
  keys(prefix: string): Promise<Array<{ key: string; port: number }>>;
  /**
   * SIGKILL one primary, run `whileDown`, start it again (empty: nothing is saved) and wait for
   * the cluster's state to be ok.
   */
  restart(port: number, whileDown: () => Promise<void>): Promise<void>;
  /** Moves the slot of `key`, and the keys in it, to the primary on `to` (a resharding). */
  moveSlot(key: string, to: number): Promise<void>;
  close(): Promise<void>;
}

const clusterOk = async (port: number) =>
  (await cli(port, ["CLUSTER", "INFO"])).includes("cluster_state:ok");

/** Starts three primaries with `--cluster-enabled yes` and joins them with `redis-cli --cluster create`. */
export async function startTestCluster(): Promise<TestCluster> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-cluster-"));
  const members: Member[] = [];
  const close = async () => {
    await Promise.all(members.map((m) => stopProcess(m.child, "SIGKILL")));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const ports = await freePorts(6);
    for (let i = 0; i < 3; i++) {
      const [port, bus] = [ports[i] as number, ports[i + 3] as number];
      // The bus port is chosen too: the default (port + 10000) may fall in the ephemeral range.
      const args = [
        ...serverArgs(port),
        ...["--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`],
        ...["--cluster-port", String(bus), "--cluster-node-timeout", "1000", "--dir", dir],
      ];
      members.push(await member(port, args));
    }
    const addresses = members.map((m) => `127.0.0.1:${m.port}`);
    await run("redis-cli", ["--cluster", "create", ...addresses, "--cluster-yes"]);
    const allOk = async () =>
      (await Promise.all(members.map((m) => clusterOk(m.port)))).every(Boolean);
    await until("the cluster's state turning ok", allOk);
    const idOf = (port: number) => cli(port, ["CLUSTER", "MYID"]);
    const keys = async (prefix: string) => {
      const found = await Promise.all(
        members.map(async (m) => {
          const listed = await cli(m.port, ["--scan", "--pattern", `${prefix}*`]);
          return listed === "" ? [] : listed.split("\n").map((key) => ({ key, port: m.port }));
        }),
      );
      return found.flat();
    };
    return {
      ports: members.map((m) => m.port),
      seeds: members.map((m) => `redis://127.0.0.1:${m.port}`),
      keys,
      async restart(port, whileDown) {
        const m = members.find((candidate) => candidate.port === port) as Member;
        await stopProcess(m.child, "SIGKILL");
        await whileDown();
        m.child = await launchRedis(m.args, () => answers(port));
        await until("the cluster's state turning ok after a restart", allOk);
      },
      async moveSlot(key, to) {
        const slot = await cli(to, ["CLUSTER", "KEYSLOT", key]);
        const from = (await keys(key)).find((k) => k.key === key)?.port as number;
        const [fromId, toId] = [await idOf(from), await idOf(to)];
        await cli(to, ["CLUSTER", "SETSLOT", slot, "IMPORTING", fromId]);
        await cli(from, ["CLUSTER", "SETSLOT", slot, "MIGRATING", toId]);
        const moving = (await cli(from, ["CLUSTER", "GETKEYSINSLOT", slot, "1000"])).split("\n");
        await cli(from, ["MIGRATE", "127.0.0.1", String(to), "", "0", "5000", "KEYS", ...moving]);
        for (const m of members) await cli(m.port, ["CLUSTER", "SETSLOT", slot, "NODE", toId]);
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A primary and a replica watched by three Sentinels, which have a password of their own. */
export interface TestSentinels {
  readonly masterName: string;
  /** The Sentinels, as `limits.redis.sentinel.nodes` lists them. */
  readonly nodes: readonly string[];
  readonly sentinelPorts: readonly number[];
  /** The Sentinels' own password. */
  readonly password: string;
  /** The port of the primary the Sentinels name now. */
  primaryPort(): Promise<number>;
  /** SIGKILL the server on `port`. */
  kill(port: number): Promise<void>;
  close(): Promise<void>;
}

const MASTER = "mymaster";
const SENTINEL_PASSWORD = "sentinel-secret-for-tests";

/**
 * Starts a primary, a replica of it, and three Sentinels (`redis-server FILE --sentinel`) that
 * declare a primary down after 1 s; resolves once every Sentinel sees the replica and the others.
 */
export async function startTestSentinels(): Promise<TestSentinels> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-sentinel-"));
  const members: Member[] = [];
  const close = async () => {
    await Promise.all(members.map((m) => stopProcess(m.child, "SIGKILL")));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const [primary, replica, ...sentinels] = (await freePorts(5)) as [number, number, ...number[]];
    members.push(await member(primary, serverArgs(primary)));
    const replicaArgs = [...serverArgs(replica), "--replicaof", "127.0.0.1", String(primary)];
    members.push(await member(replica, replicaArgs));
    await until("the replica's link to the primary", async () =>
      (await cli(replica, ["INFO", "replication"])).includes("master_link_status:up"),
    );
    for (const port of sentinels) {
      const file = join(dir, `sentinel-${port}.conf`);
      // Sentinel rewrites its file as it learns the others and the failovers.
      await writeFile(
        file,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `requirepass ${SENTINEL_PASSWORD}`,
          `sentinel sentinel-pass ${SENTINEL_PASSWORD}`,
          `sentinel monitor ${MASTER} 127.0.0.1 ${primary} 2`,
          `sentinel down-after-milliseconds ${MASTER} 1000`,
          `sentinel failover-timeout ${MASTER} 5000`,
          "",
        ].join("\n"),
      );
      members.push(await member(port, [file, "--sentinel"]));
    }
    const master = (port: number) => cli(port, ["SENTINEL", "MASTER", MASTER], SENTINEL_PASSWORD);
    await until("every Sentinel seeing the replica and the two others", async () => {
      const replies = await Promise.all(sentinels.map(master));
      return replies.every(
        (r) => field(r, "num-slaves") === "1" && field(r, "num-other-sentinels") === "2",
      );
    });
    return {
      masterName: MASTER,
      nodes: sentinels.map((port) => `redis://127.0.0.1:${port}`),
      sentinelPorts: sentinels,
      password: SENTINEL_PASSWORD,
      async primaryPort() {
        const reply = await cli(
          sentinels[0] as number,
          ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER],
          SENTINEL_PASSWORD,
        );
        return Number(reply.split("\n")[1]);
      },
      async kill(port) {
        const m = members.find((candidate) => candidate.port === port) as Member;
        await stopProcess(m.child, "SIGKILL");
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A private server with an ACL user `user` whose password is `password`. */
export async function startAclRedis(user: string, password: string) {
  const redis = await startTestRedis();
  await cli(redis.port, ["ACL", "SETUSER", user, "on", `>${password}`, "~*", "&*", "+@all"]);
  return redis;
}

/** A server speaking only TLS, with the CA that verifies it. */
export interface TlsRedis {
  readonly url: string;
  /** The CA bundle, PEM. */
  readonly ca: string;
  /** The only name on the server's certificate (not 127.0.0.1). */
  readonly serverName: string;
  close(): Promise<void>;
}

const SERVER_NAME = "redis.gatehouse.test";

async function certificates(dir: string): Promise<void> {
  const openssl = (...args: string[]) => run("openssl", args, { cwd: dir });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await openssl(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=gatehouse test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=keyCertSign",
  );
  await openssl(
    "req",
    ...ec,
    "-keyout",
    "server.key",
    "-out",
    "server.csr",
    "-subj",
    `/CN=${SERVER_NAME}`,
  );
  await writeFile(
    join(dir, "server.ext"),
    `subjectAltName=DNS:${SERVER_NAME}\nextendedKeyUsage=serverAuth\n`,
  );
  await openssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "server.pem",
    "-days",
    "2",
    "-extfile",
    "server.ext",
  );
}

function tlsAnswers(port: number, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ port, host: "127.0.0.1", ca, servername: SERVER_NAME });
    socket.setTimeout(500, () => socket.destroy());
    socket.once("error", () => resolve(false));
    socket.once("close", () => resolve(false));
    socket.once("secureConnect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      resolve(data.toString("latin1").startsWith("+PONG"));
      socket.destroy();
    });
  });
}

/**
 * Starts a TLS-only server (`--tls-port`, certificate from a CA made here with openssl); resolves
 * with the reason instead where openssl is missing or redis-server was built without TLS.
 */
export async function startTlsRedis(): Promise<TlsRedis | string> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-tls-"));
  const removeDir = () => rm(dir, { recursive: true, force: true });
  try {
    await certificates(dir);
  } catch (error) {
    await removeDir();
    return `openssl could not make the certificates (${(error as Error).message.split("\n")[0]})`;
  }
  const ca = await readFile(join(dir, "ca.pem"), "utf8");
  const port = await refusingPort();
  const args = [
    ...serverArgs(0),
    ...[
      "--tls-port",
      String(port),
      "--tls-auth-clients",
      "no",
      "--tls-ca-cert-file",
      join(dir, "ca.pem"),
    ],
    ...["--tls-cert-file", join(dir, "server.pem"), "--tls-key-file", join(dir, "server.key")],
  ];
  let child: ChildProcess;
  try {
    child = await launchRedis(args, () => tlsAnswers(port, ca));
  } catch (error) {
    await removeDir();
    const message = (error as Error).message;
    if (/exited with .*(Bad directive|not supported)/is.test(message)) {
      return "this redis-server was built without TLS (--tls-port is not a known option)";
    }
    throw error;
  }
  return {
    url: `rediss://127.0.0.1:${port}`,
    ca,
    serverName: SERVER_NAME,
    async close() {
      await stopProcess(child, "SIGKILL");
      await removeDir();
    },
  };
}

/**
 * The Redis deployments production runs, started by the test from the machine's redis-server and
 * redis-cli on ports of the test's own: a 3-primary Cluster, a primary with a replica behind
 * three Sentinels, and an ACL user with a password.
 * Each lives in a temporary folder that `close()` removes.
 */
import { execFile, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { refusingPort } from "./ports.js";
import { answers, launchRedis, serverArgs, startTestRedis, stopProcess } from "./redis.js";
import { makeCertificates, tlsAnswers, tlsServerArgs } from "./redis-tls.js";

const run = promisify(execFile);

/** Runs `redis-cli ARGS` against 127.0.0.1:`port` and returns what it printed. */
export async function redisCli(port: number, args: readonly string[], password?: string) {
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
  readonly ready: () => Promise<boolean>;
  child: ChildProcess;
}

async function member(port: number, args: readonly string[]): Promise<Member> {
  const ready = () => answers(port);
  return { port, args, ready, child: await launchRedis(args, ready) };
}

/** A 3-primary Redis Cluster. */
export interface TestCluster {
  readonly ports: readonly number[];
  /** The seed nodes, as `limits.redis.cluster` lists them. */
  readonly seeds: readonly string[];
  /** With TLS: the CA bundle (PEM) that verifies the nodes. */
  readonly ca: string | undefined;
  /** The keys starting with `prefix`, with the port of the primary holding each. */
  keys(prefix: string): Promise<Array<{ key: string; port: number }>>;
  /**
   * SIGKILL one primary, run `whileDown`, start it again (empty: nothing is saved) and wait for
   * the cluster's state to be ok.
   */
  restart(port: number, whileDown: () => Promise<void>): Promise<void>;
  /** Moves the slot of `key`, and the keys in it, to the primary on `to` (a resharding). */
  moveSlot(key: string, to: number): Promise<void>;
  /** The `CLIENT LIST` of the node on `port`. */
  clientList(port: number): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts three primaries with `--cluster-enabled yes` and joins them with `redis-cli --cluster
 * create`. With `tls`, the nodes speak only TLS, to clients and to each other.
 */
export async function startTestCluster(options: { tls?: boolean } = {}): Promise<TestCluster> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-cluster-"));
  const members: Member[] = [];
  const close = async () => {
    await Promise.all(members.map((m) => stopProcess(m.child, "SIGKILL")));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const certs = options.tls ? await makeCertificates(dir, { ip: true }) : undefined;
    const cliTls = certs === undefined ? [] : ["--tls", "--cacert", certs.caFile];
    const cli = (port: number, args: readonly string[]) => redisCli(port, [...cliTls, ...args]);
    const ports = await freePorts(6);
    for (let i = 0; i < 3; i++) {
      const [port, bus] = [ports[i] as number, ports[i + 3] as number];
      // The bus port is chosen too: the default (port + 10000) may fall in the ephemeral range.
      const args = [
        ...(certs === undefined ? serverArgs(port) : tlsServerArgs(port, certs)),
        ...(certs === undefined ? [] : ["--tls-cluster", "yes"]),
        ...["--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`],
        ...["--cluster-port", String(bus), "--cluster-node-timeout", "1000", "--dir", dir],
      ];
      const ready = () => (certs === undefined ? answers(port) : tlsAnswers(port, certs.ca));
      members.push({ port, args, ready, child: await launchRedis(args, ready) });
    }
    const addresses = members.map((m) => `127.0.0.1:${m.port}`);
    await run("redis-cli", [...cliTls, "--cluster", "create", ...addresses, "--cluster-yes"]);
    const clusterOk = async (port: number) =>
      (await cli(port, ["CLUSTER", "INFO"])).includes("cluster_state:ok");
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
      seeds: members.map((m) => `${certs ? "rediss" : "redis"}://127.0.0.1:${m.port}`),
      ca: certs?.ca,
      keys,
      async restart(port, whileDown) {
        const m = members.find((candidate) => candidate.port === port) as Member;
        await stopProcess(m.child, "SIGKILL");
        await whileDown();
        m.child = await launchRedis(m.args, m.ready);
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
      clientList: (port) => cli(port, ["CLIENT", "LIST"]),
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
    // In the temporary folder: a replica writes the primary's snapshot to its working folder.
    const inDir = ["--dir", dir];
    members.push(await member(primary, [...serverArgs(primary), ...inDir]));
    const replicaArgs = [
      ...serverArgs(replica),
      ...inDir,
      "--replicaof",
      "127.0.0.1",
      String(primary),
    ];
    members.push(await member(replica, replicaArgs));
    await until("the replica's link to the primary", async () =>
      (await redisCli(replica, ["INFO", "replication"])).includes("master_link_status:up"),
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
    const master = (port: number) =>
      redisCli(port, ["SENTINEL", "MASTER", MASTER], SENTINEL_PASSWORD);
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
        const reply = await redisCli(
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
  await redisCli(redis.port, ["ACL", "SETUSER", user, "on", `>${password}`, "~*", "&*", "+@all"]);
  return redis;
}

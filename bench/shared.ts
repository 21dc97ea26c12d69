/**
 * What the scenarios of one run share: a directory, a signing key, the settings, and the
 * processes (the upstream, two bare forwarders, two gatehouse processes with `benchConfig`), each
 * started the first time a scenario asks for it, so a run starts only what its scenarios need;
 * and a scenario's own pairs of gatehouse processes, started from a changed `benchConfig`.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LimitsContext } from "./limits-kit.js";
import type { LoadOptions } from "./load.js";
import { pin, type Pinning } from "./pin.js";
import {
  freePort,
  startBare,
  startBareUndici,
  startExpressStack,
  startGatehouse,
  startUpstream,
  type Served,
} from "./processes.js";
import {
  benchConfig,
  newSecrets,
  newSigningKey,
  SCOPE,
  type Secrets,
  type Variant,
} from "./scenarios.js";

/** The run's processes, each started on first use, and what its own processes need. */
export interface Shared {
  /** The client secrets of the shared gatehouse processes. */
  readonly secrets: Secrets;
  /** The upstream and the rest that a scenario starting gatehouse processes of its own needs. */
  context(): Promise<LimitsContext>;
  /** Two bare forwarders in front of the upstream. */
  bares(): Promise<readonly [Served, Served]>;
  /** Two bare undici forwarders, the bare http-proxy-3 ones' peers. */
  bareUndicis(): Promise<readonly [Served, Served]>;
  /** Two Express stacks doing the full request's work. */
  expressStacks(): Promise<readonly [Served, Served]>;
  /** Two gatehouse processes with the same config, `benchConfig`, in front of the upstream. */
  gatehouses(): Promise<readonly [Served, Served]>;
  /**
   * Two gatehouse processes of a scenario's own, `name` and `name twin`, with `benchConfig`
   * changed as `variant` says; pinned with the proxies, as the shared ones, and stopped with the
   * run.
   */
  variants(name: string, variant: Variant): Promise<readonly [Served, Served]>;
}

/** How the run's processes are started. */
export interface SharedOptions {
  readonly load: LoadOptions;
  readonly pinning: Pinning | null;
  /** Node options for the bare forwarders and every gatehouse process (CPU profiling). */
  readonly profiling: readonly string[];
}

// Starts the first time it is called; every call gets what that start gave.
function once<T>(start: () => Promise<T>): () => Promise<T> {
  let started: Promise<T> | undefined;
  return () => (started ??= start());
}

/** Makes the run's directory and signing key; `close` stops whatever was started and removes them. */
export async function openShared(
  options: SharedOptions,
): Promise<Shared & { close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-bench-"));
  const keyFile = join(dir, "signing.pem");
  await writeFile(keyFile, newSigningKey());
  const secrets = newSecrets();
  const started: Served[] = [];
  const adopt = (served: Served) => void started.push(served);
  const pinned = (served: Served, cores: "proxies" | "others") => {
    if (options.pinning !== null) pin(served.pid, options.pinning[cores]);
    return served;
  };
  const profiling = [...options.profiling];

  const upstream = once(async () => {
    const served = await startUpstream();
    adopt(served);
    return pinned(served, "others");
  });
  // Two processes of each kind: in the paired rounds each gatehouse process is measured against
  // its own peer in turn, so that how fast one process happens to be (the same build has differed
  // by 10% from one start to the next) weighs on both kinds alike.
  const twoOf = (start: (upstreamUrl: string) => Promise<Served>) =>
    once(async () => {
      const { url } = await upstream();
      const pair: Served[] = [];
      for (let i = 0; i < 2; i++) {
        const served = await start(url);
        adopt(served);
        pair.push(pinned(served, "proxies"));
      }
      return pair as [Served, Served];
    });
  const bares = twoOf((url) => startBare(url, profiling));
  const bareUndicis = twoOf((url) => startBareUndici(url, profiling));
  const expressStacks = twoOf((url) => startExpressStack(url, keyFile, SCOPE));
  const startPair = async (
    name: string,
    variant: Variant,
    execArgv: string[],
  ): Promise<[Served, Served]> => {
    const { url } = await upstream();
    const pair: Served[] = [];
    for (const each of [name, `${name} twin`]) {
      const port = await freePort();
      const configPath = join(dir, `${each.replaceAll(" ", "-")}.yaml`);
      await writeFile(configPath, benchConfig(url, port, keyFile, variant));
      const env = { ...process.env, ...secrets.env };
      const served = await startGatehouse(each, configPath, port, env, execArgv);
      adopt(served);
      pair.push(pinned(served, "proxies"));
    }
    return pair as [Served, Served];
  };
  const gatehouses = once(() => startPair("gatehouse", {}, profiling));
  const context = once(async (): Promise<LimitsContext> => ({
    upstream: await upstream(),
    keyFile,
    dir,
    pinning: options.pinning,
    load: options.load,
    adopt,
  }));

  return {
    secrets,
    context,
    bares,
    bareUndicis,
    expressStacks,
    gatehouses,
    variants: (name, variant) => startPair(name, variant, profiling),
    async close() {
      for (const served of started.reverse()) await served.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

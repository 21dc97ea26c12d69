/**
 * The deployment examples: the Kubernetes manifest against the Kubernetes API's schemas (offline,
 * from kubernetes-models) and the habits a production manifest needs; the docker-compose file
 * parsed; and the gatehouse config of each started as a process, with a Redis server of the
 * test's own and the signing key the example names.
 */
import { spawnSync } from "node:child_process";
import { readFile, mkdtemp, writeFile } from "node:fs/promises";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import t, { type Test } from "tap";
import { parse, parseAllDocuments } from "yaml";
import { durationMs } from "../src/config/duration.js";
import { parseConfigText } from "../src/config/load.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { startCli, type CliProcess } from "./helpers/cli.js";
import { manualFiles, readManual, section } from "./helpers/docs.js";
import { localConfig } from "./helpers/shipped-config.js";
import { refusingPort } from "./helpers/ports.js";
import { answers, launchRedis, serverArgs, startTestRedis, stopProcess } from "./helpers/redis.js";
import { redisCli } from "./helpers/redis-topologies.js";
import { obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

type Json = Record<string, unknown>;
interface Container extends Json {
  name: string;
  securityContext?: Json & { capabilities?: { drop?: string[] } };
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources?: { requests?: Json; limits?: Json };
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string } } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}

const manifestText = await readFile("deploy/kubernetes.yaml", "utf8");
const manifests = parseAllDocuments(manifestText).map((doc) => doc.toJS() as Json);
const byKind = (kind: string) => manifests.find((m) => m.kind === kind) as Json;
const deployment = byKind("Deployment") as {
  spec: { template: { spec: Json & { containers: Container[]; volumes: Json[] } } };
};
const pod = deployment.spec.template.spec;
const gatehouseContainer = pod.containers.find((c) => c.name === "gatehouse") as Container;
const configMapText = (byKind("ConfigMap").data as Record<string, string>)["proxy.config.yaml"];
const kubeConfig = parseConfigText(configMapText as string, "deploy/kubernetes.yaml").file;

// kubernetes-models ships the Kubernetes OpenAPI schemas as compiled validators: one module per
// kind, `kubernetes-models/GROUP/VERSION/KIND` (`v1/ConfigMap`, `apps/v1/Deployment`).
t.test("every manifest is valid against the Kubernetes schemas", async (t) => {
  t.ok(manifests.length >= 3);
  for (const manifest of manifests) {
    const kind = manifest.kind as string;
    const module = (await import(
      `kubernetes-models/${manifest.apiVersion as string}/${kind}`
    )) as Record<string, new (data: Json) => { validate(): void }>;
    const Model = module[kind] as new (data: Json) => { validate(): void };
    t.doesNotThrow(() => new Model(manifest).validate(), kind);
  }
  // The validator catches what matters: a wrong type in the same place fails.
  const { Deployment } = await import("kubernetes-models/apps/v1/Deployment");
  const broken = structuredClone(byKind("Deployment")) as typeof deployment;
  const brokenGatehouse = broken.spec.template.spec.containers.find((c) => c.name === "gatehouse");
  (brokenGatehouse?.securityContext as Json).runAsUser = "node";
  t.throws(() => new Deployment(broken as never).validate(), /runAsUser must be integer/);
});

t.test("gatehouse's container runs as a numeric non-root user, locked down", async (t) => {
  t.match(gatehouseContainer.securityContext, {
    runAsNonRoot: true,
    runAsUser: Number,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    seccompProfile: { type: "RuntimeDefault" },
  });
  t.not(gatehouseContainer.securityContext?.runAsUser, 0);
  t.strictSame(gatehouseContainer.securityContext?.capabilities?.drop, ["ALL"]);
  for (const container of pod.containers) {
    t.ok(container.resources?.requests?.memory, `${container.name} requests memory`);
    t.ok(container.resources?.limits?.memory, `${container.name} has a memory limit`);
  }
});

t.test("the application's container keeps its own security settings", async (t) => {
  // A pod-level securityContext applies to every container, and its fsGroup to every volume.
  t.equal(pod.securityContext, undefined, "nothing is set for the whole pod");
  const app = pod.containers.find((c) => c.name !== "gatehouse") as Container;
  t.equal(app.securityContext, undefined, "the example sets none for the application");
  t.match(
    manifestText,
    /^ {10}# Its securityContext \(user, file system, capabilities\) is the application's own/m,
    "and says it is the application's",
  );
  // Without an fsGroup the key's files belong to root: readable by others (0444), in the one
  // container that mounts them.
  const keys = pod.volumes.find((v) => v.name === "keys") as { secret: { defaultMode: number } };
  t.equal(keys.secret.defaultMode, 0o444);
  const mounting = pod.containers.filter((c) => c.volumeMounts?.some((m) => m.name === "keys"));
  t.strictSame(
    mounting.map((c) => c.name),
    ["gatehouse"],
  );
});

/** The port of a `HOST:PORT` listen address. */
const portOf = (address: string): number => Number(address.slice(address.lastIndexOf(":") + 1));

t.test("probes use gatehouse's health paths on its admin port", async (t) => {
  const probes = gatehouseContainer as Container & Record<string, { httpGet?: Json }>;
  const { liveness_path: liveness, readiness_path: readiness } = kubeConfig.health;
  t.strictSame(probes.readinessProbe?.httpGet, { path: readiness, port: "admin" });
  t.strictSame(probes.livenessProbe?.httpGet, { path: liveness, port: "admin" });
  t.strictSame(probes.startupProbe?.httpGet, { path: liveness, port: "admin" });
  // A full public port closes new connections unanswered; the admin port keeps answering.
  const ports = gatehouseContainer.ports as Array<{ name: string; containerPort: number }>;
  const admin = ports.find((p) => p.name === "admin");
  t.equal(admin?.containerPort, portOf(kubeConfig.admin_listen), "the port admin_listen binds");
  t.not(admin?.containerPort, portOf(kubeConfig.listen), "not the public one");
});

interface IngressRule {
  from?: Json[];
  ports?: Array<{ protocol?: string; port: number | string }>;
}

// The legacy container's own port is the one a client must not reach around gatehouse, even
// should the application listen on every interface.
t.test(
  "the NetworkPolicy admits gatehouse's ports only, the admin one from monitoring",
  async (t) => {
    const policy = byKind("NetworkPolicy") as {
      spec: { podSelector: { matchLabels: Json }; policyTypes: string[]; ingress: IngressRule[] };
    };
    t.ok(policy, "the manifest has one");
    const labels = (deployment.spec.template as { metadata?: { labels?: Json } }).metadata?.labels;
    t.strictSame(policy.spec.podSelector.matchLabels, labels, "it selects gatehouse's pods");
    t.strictSame(policy.spec.policyTypes, ["Ingress"]);
    const admitted = policy.spec.ingress.flatMap((rule) => {
      t.ok((rule.ports ?? []).length > 0, "every rule names its ports: none admits every port");
      return (rule.ports ?? []).map((p) => ({
        protocol: p.protocol,
        port: p.port,
        from: rule.from,
      }));
    });
    const listening = [kubeConfig.listen, kubeConfig.admin_listen].map(portOf);
    t.strictSame(
      admitted.map((p) => p.port),
      listening,
      "the ports listen and admin_listen bind",
    );
    const declared = (gatehouseContainer.ports as Array<{ containerPort: number }>).map(
      (p) => p.containerPort,
    );
    t.strictSame(declared, listening, "which gatehouse's container declares");
    t.ok(
      admitted.every((p) => p.protocol === "TCP"),
      "over TCP",
    );
    t.equal(admitted[0]?.from, undefined, "the public port from anywhere");
    t.strictSame(
      admitted[1]?.from,
      [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
      "the admin port only from the monitoring namespace",
    );
    t.match(
      manifestText,
      /^ *# .*namespace named monitoring.*\n *# .*kubernetes\.io\/metadata\.name/m,
    );
    const app = pod.containers.find((c) => c.name !== "gatehouse") as Container;
    const appPort = Number(app.env?.find((v) => v.name === "PORT")?.value);
    t.equal(
      new URL(kubeConfig.upstream.url).port,
      String(appPort),
      "the upstream is the app's port",
    );
    t.notOk(listening.includes(appPort), `the application's port ${appPort} is not admitted`);
  },
);

/** A TCP listener on `host`, port 0, closed at the end of `t`; its port. */
async function listenerOn(t: Test, host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, host, done));
  t.teardown(() => new Promise<void>((done) => server.close(() => done())));
  return (server.address() as AddressInfo).port;
}

// The command runs in gatehouse's container, which shares the pod's network stack: here, the
// script it hands to node reads this machine's sockets instead.
t.test("docs/deploying.md's command lists each listening address of the pod", async (t) => {
  const name = (deployment as unknown as { metadata: { name: string } }).metadata.name;
  const command = new RegExp(
    `^kubectl exec deploy/${name} -c ${gatehouseContainer.name} -- node -e '\n([^']*)'$`,
    "m",
  );
  const script = command.exec(readManual("docs/deploying.md"))?.[1] ?? "";
  t.not(script, "", "the command is there, naming the manifest's Deployment and container");
  const loopback = await listenerOn(t, "127.0.0.1");
  const every = await listenerOn(t, "0.0.0.0");
  const loopback6 = await listenerOn(t, "::1");
  const listed = spawnSync(process.execPath, ["-e", script], { encoding: "utf8" });
  t.equal(listed.stderr, "");
  t.equal(listed.status, 0);
  const lines = listed.stdout.trim().split("\n");
  t.ok(lines.includes(`127.0.0.1:${loopback}`), "on loopback");
  t.ok(lines.includes(`0.0.0.0:${every}`), "on every interface");
  t.ok(lines.includes(`[::1]:${loopback6}`), "on IPv6's loopback");
  t.notOk(lines.includes(`0.0.0.0:${loopback}`));
  t.ok(
    lines.every((line) => /^(\d+(\.\d+){3}|\[[\d:a-f.]+\]):\d+$/.test(line)),
    "nothing but addresses",
  );
});

t.test("the application outlives gatehouse's drain, within the grace period", async (t) => {
  const app = pod.containers.find((c) => c.name !== "gatehouse") as Container;
  const pause = (app.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000;
  const drain = durationMs(kubeConfig.shutdown.delay) + durationMs(kubeConfig.shutdown.grace);
  t.ok(pause > drain, `preStop ${pause} ms > drain ${drain} ms`);
  t.ok((pod.terminationGracePeriodSeconds as number) * 1000 > pause, "the kubelet waits for both");
});

t.test("every Secret the manifest reads is defined or made by a documented command", async (t) => {
  const defined = manifests
    .filter((m) => m.kind === "Secret")
    .map((m) => (m.metadata as Json).name);
  const referenced = new Set<string>();
  for (const container of pod.containers) {
    for (const variable of container.env ?? []) {
      const ref = variable.valueFrom?.secretKeyRef?.name;
      if (ref !== undefined) referenced.add(ref);
    }
  }
  for (const volume of pod.volumes) {
    const secret = (volume.secret as { secretName?: string } | undefined)?.secretName;
    if (secret !== undefined) referenced.add(secret);
  }
  t.ok(referenced.size >= 2);
  for (const name of referenced) {
    const made = new RegExp(`^# +kubectl create secret generic ${name} `, "m").test(manifestText);
    t.ok(defined.includes(name) || made, `${name} is defined or created in the file's comments`);
  }
});

t.test(
  "kubernetes: the admin token comes from a Secret that docs/deploying.md's command makes",
  async (t) => {
    const name = kubeConfig.admin_token_env;
    t.not(name, "", "admin_token_env is set: every container of the pod shares its loopback");
    const ref = (gatehouseContainer.env ?? []).find((v) => v.name === name)?.valueFrom
      ?.secretKeyRef as { name: string; key: string } | undefined;
    t.ok(ref, `${name} comes from a secretKeyRef`);
    const deploying = readManual("docs/deploying.md");
    const made = new RegExp(
      `^kubectl create secret generic ${ref?.name} .*--from-literal=${ref?.key}=`,
      "m",
    );
    t.match(deploying, made, "docs/deploying.md's kubectl line creates that key");
    t.match(manifestText, new RegExp(`^# +${made.source.slice(1)}`, "m"), "so does the manifest's");
  },
);

t.test(
  "the config is mounted where the image looks, the key where the config names it",
  async (t) => {
    const dockerfile = await readFile("Dockerfile", "utf8");
    const imageConfig = /GATEHOUSE_CONFIG=(\S+)/.exec(dockerfile)?.[1] as string;
    const mounts = gatehouseContainer.volumeMounts ?? [];
    t.ok(mounts.some((m) => m.name === "config" && m.mountPath === dirname(imageConfig)));
    const keyFile = kubeConfig.tokens.signing.key_file as string;
    t.ok(mounts.some((m) => m.name === "keys" && m.mountPath === dirname(keyFile)));
  },
);

const compose = parse(await readFile("deploy/compose/docker-compose.yaml", "utf8")) as {
  services: Record<string, Json & { volumes?: string[]; secrets?: string[]; image?: string }>;
  secrets: Record<string, { file: string }>;
  networks?: { default?: { ipam?: { config?: Array<{ subnet?: string }> } } };
};
const gatehouseServices = Object.entries(compose.services).filter(
  ([, service]) => service.build !== undefined,
);
const composeConfigPath = "deploy/compose/config/proxy.config.yaml";
const composeConfig = parseConfigText(await readFile(composeConfigPath, "utf8"), composeConfigPath);

t.test(
  "compose: replicas share one key and one Redis; the config is a mounted folder",
  async (t) => {
    t.equal(gatehouseServices.length, 1);
    const [, service] = gatehouseServices[0] as [string, (typeof gatehouseServices)[0][1]];
    t.ok(((service.deploy as Json).replicas as number) >= 2, "several replicas");
    const mount = (service.volumes ?? []).find((v) => v.split(":")[1] === "/etc/gatehouse") ?? "";
    const source = resolve("deploy/compose", mount.split(":")[0] as string);
    t.ok(statSync(source).isDirectory(), "a folder, so a save by rename reaches the container");
    t.equal(resolve(source, "proxy.config.yaml"), resolve(composeConfigPath));
    const [secret] = service.secrets ?? [];
    t.equal(composeConfig.file.tokens.signing.key_file, `/run/secrets/${secret}`);
    const keyFile = compose.secrets[secret as string]?.file as string;
    t.match(keyFile, /^\.\/keys\//, "a file under keys/");
    const ignored = spawnSync("git", ["check-ignore", "-q", join("deploy/compose", keyFile)]);
    t.equal(ignored.status, 0, "which git ignores, like the top-level keys/");
    t.equal(spawnSync("git", ["check-ignore", "-q", "keys/signing.pem"]).status, 0);
    t.equal(composeConfig.file.limits.store, "redis");
    t.equal(new URL(composeConfig.file.limits.redis.url ?? "").hostname, "redis");
    t.ok(compose.services.redis, "a redis service");
    const upstreamHost = new URL(composeConfig.file.upstream.url).hostname;
    t.match(
      compose.services[upstreamHost]?.image,
      /^[a-z0-9./-]+:v?\d+\.\d+/,
      "a published, pinned upstream",
    );
    t.notMatch(compose.services[upstreamHost]?.image, /example\.com/);
  },
);

// Docker opens a published port in the firewall rules itself, ahead of a host firewall: a port on
// every interface would reach the replicas from any network the host is on.
t.test("compose: every published port is on the host's loopback, one per replica", async (t) => {
  const published = Object.entries(compose.services).flatMap(([name, service]) =>
    ((service.ports ?? []) as unknown[]).map((port) => ({ name, port })),
  );
  t.ok(published.length > 0, "something is published, to try the example");
  for (const { name, port } of published) {
    t.match(port, /^127\.0\.0\.1:\d+(-\d+)?:\d+$/, `${name}: ${String(port)}`);
  }
  const [, service] = gatehouseServices[0] as [string, (typeof gatehouseServices)[0][1]];
  const ports = (service.ports ?? []) as string[];
  t.equal(ports.length, 1);
  const [, first, last = first, inside] =
    /^127\.0\.0\.1:(\d+)(?:-(\d+))?:(\d+)$/.exec(ports[0] ?? "") ?? [];
  t.equal(Number(inside), portOf(composeConfig.file.listen), "gatehouse's public port");
  // Two replicas on one host port: the second would fail to start.
  t.equal(
    Number(last) - Number(first) + 1,
    (service.deploy as Json).replicas,
    "a host port for each replica",
  );
  t.match(
    await readFile("deploy/compose/docker-compose.yaml", "utf8"),
    /^ *# .*In production a balancer in front/m,
    "and the file says a balancer goes in front in production",
  );
});

/** The documented command that makes the compose example's key, and its parts. */
function composeKeyCommand(text: string) {
  const line =
    text
      .split("\n")
      .map((l) => l.replace(/^# +/, ""))
      .find((l) => l.startsWith("docker run") && l.includes("keygen --out")) ?? "";
  const [, folder, inside, script] =
    /-v "\$PWD\/([^:]+):([^"]+)" --entrypoint sh gatehouse:local -c '([^']+)'$/.exec(line) ?? [];
  return { line, folder: folder ?? "", inside: inside ?? "", script: script ?? "" };
}

// Compose mounts a secret's file as the host has it, owner and mode: the key must be the image
// user's, readable by no one else.
t.test("compose: the key is written with mode 0600, owned by the image's user", async (t) => {
  const fromCompose = composeKeyCommand(
    await readFile("deploy/compose/docker-compose.yaml", "utf8"),
  );
  const fromDocs = composeKeyCommand(readManual("docs/deploying.md"));
  t.not(fromCompose.script, "", "the compose file shows the command");
  t.equal(fromDocs.line, fromCompose.line, "and docs/deploying.md the same one");
  const { folder, inside, script } = fromCompose;
  const secretFile = resolve("deploy/compose", compose.secrets.gatehouse_signing_key?.file ?? "");
  const out = /keygen --out (\S+)/.exec(script)?.[1] ?? "";
  t.equal(dirname(out), inside, "keygen writes into the mounted folder");
  t.equal(resolve(folder, basename(out)), secretFile, "the file the compose secret mounts");
  const imageUser = /^USER (\d+:\d+)$/m.exec(await readFile("Dockerfile", "utf8"))?.[1] ?? "";
  t.match(script, new RegExp(`&& chown ${imageUser} ${out}$`), `handed to ${imageUser}`);
  // Run here as written, the container's folder a temporary one; without root, the key is handed
  // to this process's own user, the one it may give files to.
  const root = process.getuid?.() === 0;
  const owner = root ? imageUser : `${process.getuid?.()}:${process.getgid?.()}`;
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-compose-key-"));
  const local = script.replace(`chown ${imageUser}`, `chown ${owner}`).replaceAll(inside, dir);
  const made = spawnSync("sh", ["-c", local], { encoding: "utf8", env: { ...process.env } });
  t.equal(made.status, 0, made.stderr);
  const key = statSync(join(dir, basename(out)));
  t.equal(key.mode & 0o777, 0o600, "readable by its owner only");
  t.equal(`${key.uid}:${key.gid}`, owner);
  const pem = readFileSync(join(dir, basename(out)), "utf8");
  t.match(pem, /^-----BEGIN PRIVATE KEY-----\n/);
  const again = spawnSync("sh", ["-c", local], { encoding: "utf8" });
  t.equal(again.status, 1, "run again, it fails");
  t.match(again.stderr, /already exists; keygen never overwrites/);
  t.equal(readFileSync(join(dir, basename(out)), "utf8"), pem, "and the key is kept");
});

// Behind an ingress or a balancer every client is the proxy's address unless the proxy is trusted:
// each example trusts where its proxy connects from, and the manual says where that comes from.
t.test(
  "the examples trust their proxies: the pod range, the compose network's subnet",
  async (t) => {
    const subnets = (compose.networks?.default?.ipam?.config ?? []).map((entry) => entry.subnet);
    t.equal(subnets.length, 1, "the compose network has one fixed subnet");
    t.strictSame(composeConfig.file.trusted_proxies, subnets, "and its config trusts it");
    t.equal(kubeConfig.trusted_proxies.length, 1, "the ConfigMap trusts one range");
    const manual = section(readManual("docs/deploying.md"), "Client addresses behind a proxy");
    for (const range of [...subnets, ...kubeConfig.trusted_proxies]) {
      t.ok(manual.includes(`\`${range}\``), `docs/deploying.md names ${range}`);
    }
    t.match(manual, /podCIDR/, "and how to find a cluster's pod range");
  },
);

// What a CI job can run on the examples without their secrets: the variables (REPORTING_APP_SECRET)
// and the mounted key exist only where they are deployed, and check --no-env does not ask for them.
t.test("each example's config passes gatehouse check --no-env", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-deploy-check-"));
  const kubeConfigPath = join(dir, "proxy.config.yaml");
  await writeFile(kubeConfigPath, configMapText as string);
  const env: NodeJS.ProcessEnv = { ...process.env, GATEHOUSE_CONFIG: "" };
  delete env.REPORTING_APP_SECRET;
  for (const path of [composeConfigPath, kubeConfigPath]) {
    const check = (...options: string[]) =>
      spawnSync(process.execPath, ["dist/src/cli.js", "check", "--config", path, ...options], {
        encoding: "utf8",
        env,
      });
    const withEnvironment = check();
    t.equal(withEnvironment.status, 1, `${path}: its secrets are not here`);
    t.match(withEnvironment.stderr, /REPORTING_APP_SECRET, which is not set/);
    const away = check("--no-env");
    t.equal(away.stderr, "", path);
    t.equal(away.status, 0, path);
    t.match(away.stdout, /: ok \(/);
  }
});

// A container's loopback is its own: a port published from it reaches only a listener on every
// interface. The example a user runs on their own machine keeps strangers out instead.
t.test("the containers listen on every interface, the quick start on loopback", async (t) => {
  t.equal(kubeConfig.listen, "0.0.0.0:8080", "deploy/kubernetes.yaml");
  t.equal(composeConfig.file.listen, "0.0.0.0:8080", composeConfigPath);
  const example = parseConfigText(await readFile("proxy.config.yaml", "utf8"), "proxy.config.yaml");
  t.equal(example.file.listen, "127.0.0.1:8080", "proxy.config.yaml");
  t.equal(example.file.admin_listen, "127.0.0.1:9901", "proxy.config.yaml");
});

t.test(
  "compose: the admin token comes from a git-ignored env file docs/deploying.md makes",
  async (t) => {
    const name = composeConfig.file.admin_token_env;
    t.not(name, "", "admin_token_env is set: the admin listener is on every interface");
    const [, service] = gatehouseServices[0] as [string, (typeof gatehouseServices)[0][1]];
    t.notOk((service.environment as Json | undefined)?.[name], "not written in the compose file");
    const envFiles = service.env_file as string[];
    t.equal(envFiles.length, 1);
    const envFile = join("deploy/compose", envFiles[0] as string);
    t.equal(spawnSync("git", ["check-ignore", "-q", envFile]).status, 0, `${envFile} is ignored`);
    const deploying = readManual("docs/deploying.md");
    const line = deploying.split("\n").find((l) => l.includes(`> ${envFile}`)) ?? "";
    t.match(line, new RegExp(`${name}=`), "docs/deploying.md's command writes the token into it");
    t.match(line, /REPORTING_APP_SECRET=/, "and the client secret");
    const composeText = await readFile("deploy/compose/docker-compose.yaml", "utf8");
    t.ok(composeText.includes(`#   ${line}\n`), "the compose file shows the same command");
    // Run here as written, into a temporary folder: the secrets are readable by their owner only.
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-compose-env-"));
    const local = line.replace(`> ${envFile}`, `> ${join(dir, "gatehouse.env")}`);
    const made = spawnSync("sh", ["-c", local], { encoding: "utf8" });
    t.equal(made.status, 0, made.stderr);
    t.equal(statSync(join(dir, "gatehouse.env")).mode & 0o777, 0o600, "written with mode 0600");
  },
);

const CLIENT = {
  id: "reporting-app",
  secret: "deploy-test-client-secret-2b7c4e9a1f0d3c6b8a7e5d2f",
};
const ADMIN_TOKEN = "deploy-test-admin-token-5e81";

async function startReplicas(
  t: Test,
  text: string,
  count: number,
  redis?: string,
  env: NodeJS.ProcessEnv = {},
): Promise<CliProcess[]> {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-deploy-"));
  const keyFile = join(dir, "signing.pem");
  await writeFile(keyFile, await generateKeyPem("EdDSA"));
  const config = join(dir, "proxy.config.yaml");
  await writeFile(config, localConfig(text, { upstream: upstream.url, redis, keyFile }));
  const replicas: CliProcess[] = [];
  for (let i = 0; i < count; i++) {
    const replica = await startCli(["--config", config], {
      REPORTING_APP_SECRET: CLIENT.secret,
      GATEHOUSE_ADMIN_TOKEN: ADMIN_TOKEN,
      ...env,
    });
    // Killed: the drain is shutdown.test.ts's subject, and the Kubernetes config's 5 s
    // shutdown.delay would only make every test here wait for it.
    t.teardown(() => replica.stop("SIGKILL"));
    replicas.push(replica);
  }
  return replicas;
}

/** The compose healthcheck's command, as `node` would run it. */
function composeHealthcheck(): string[] {
  const service = gatehouseServices[0]?.[1] as { healthcheck?: { test?: string[] } };
  return service.healthcheck?.test ?? [];
}

t.test("compose: the healthcheck asks the admin port's liveness path", async (t) => {
  const [form, binary, flag, script] = composeHealthcheck();
  t.strictSame([form, binary, flag], ["CMD", "node", "-e"], "no binary but node");
  const url = new URL(/fetch\('([^']+)'\)/.exec(script ?? "")?.[1] ?? "http://-");
  t.equal(url.hostname, "127.0.0.1", "asked inside the container, on its loopback");
  t.equal(Number(url.port), portOf(composeConfig.file.admin_listen), "admin_listen's port");
  t.not(Number(url.port), portOf(composeConfig.file.listen), "not the public one");
  t.equal(url.pathname, composeConfig.file.health.liveness_path);
});

t.test("compose: two replicas of the example; a token from one is good on the other", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const text = await readFile(composeConfigPath, "utf8");
  const [first, second] = (await startReplicas(t, text, 2, redis.url)) as [CliProcess, CliProcess];
  const token = await obtainToken(first.url, CLIENT);
  const other = await fetch(`${second.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(other.status, 200, "accepted by the replica that did not issue it");
  t.equal(other.headers.get("x-ratelimit-limit"), "100");
  // Both count into the one Redis: the second replica's answer saw the first one's request too.
  const own = await fetch(`${first.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(Number(own.headers.get("x-ratelimit-remaining")), 98);
  for (const replica of [first, second]) {
    t.notOk(
      replica.lines().some((line) => line.level === "warn"),
      "no warning: the key is shared",
    );
  }
  // The healthcheck, aimed at this replica's admin listener: it has the admin token set.
  const probe = composeHealthcheck()
    .slice(2)
    .map((arg) => arg.replace("127.0.0.1:9901", new URL(first.adminUrl).host));
  t.equal(spawnSync(process.execPath, probe).status, 0, "the healthcheck passes without a token");
});

t.test("kubernetes: the ConfigMap's config serves with the key the Secret mounts", async (t) => {
  const redis = await startStandInRedis(t);
  const [replica] = (await startReplicas(t, configMapText as string, 1, redis.url, redis.env)) as [
    CliProcess,
  ];
  const token = await obtainToken(replica.url, CLIENT);
  const answer = await fetch(`${replica.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(answer.status, 200);
  t.equal((await fetch(`${replica.url}${kubeConfig.health.readiness_path}`)).status, 200);
  for (const path of [kubeConfig.health.liveness_path, kubeConfig.health.readiness_path]) {
    const probe = await fetch(`${replica.adminUrl}${path}`);
    t.equal(probe.status, 200, `the probes' ${path} on the admin port, without the token`);
  }
  t.equal((await fetch(`${replica.adminUrl}/metrics`)).status, 200, "scraped without a token");
  t.equal((await fetch(`${replica.adminUrl}/config`)).status, 401, "/config needs the token");
  const withToken = await fetch(`${replica.adminUrl}/config`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  t.equal(withToken.status, 200);
});

/** Every file under deploy/, with its text. */
function deployFiles(): Array<{ path: string; text: string }> {
  return readdirSync("deploy", { recursive: true, encoding: "utf8" })
    .map((name) => join("deploy", name))
    .filter((path) => statSync(path).isFile())
    .map((path) => ({ path, text: readFileSync(path, "utf8") }));
}

t.test("README, docs/, deploy/ and the Dockerfile name the image by one tag", async (t) => {
  const texts = [
    ...manualFiles().map((path) => ({ path, text: readManual(path) })),
    { path: "Dockerfile", text: await readFile("Dockerfile", "utf8") },
    ...deployFiles(),
  ];
  // An image reference, `[REGISTRY/...]gatehouse:TAG`, not a path such as /etc/gatehouse:ro.
  const image = /(?<=^|[\s"'`=(])(?:[\w.-]+(?::\d+)?\/)*gatehouse:(\w[\w.-]*)/gm;
  const tags = new Map<string, Set<string>>();
  for (const { path, text } of texts) {
    for (const [, tag] of text.matchAll(image)) {
      tags.set(tag as string, (tags.get(tag as string) ?? new Set()).add(path));
    }
    t.notMatch(text, /docker build -t gatehouse(?!:)/, `${path}: every build names the tag`);
    // A failed `docker run` in <(...) hands kubectl an empty file, which it stores as the key.
    t.notMatch(text, /<\(docker run/, `${path}: no process substitution that fails silently`);
  }
  const where = [...tags].map(([tag, paths]) => `${tag} in ${[...paths].join(", ")}`);
  t.strictSame([...tags.keys()], ["local"], `one tag: ${where.join("; ")}`);
  for (const path of ["README.md", "docs/deploying.md", "Dockerfile", "deploy/kubernetes.yaml"]) {
    t.ok(tags.get("local")?.has(path), `${path} names it`);
  }
  t.equal(gatehouseContainer.image, "gatehouse:local", "the manifest runs it");
  t.equal(gatehouseServices[0]?.[1].image, "gatehouse:local", "and so does compose");
});

const dockerfileText = await readFile("Dockerfile", "utf8");

/** Every gatehouse that an example in deploy/ runs: how many replicas, and its config. */
function gatehouseFleets(): Array<{ where: string; replicas: number; config: string }> {
  const configName = basename(/GATEHOUSE_CONFIG=(\S+)/.exec(dockerfileText)?.[1] as string);
  const isGatehouse = (image: unknown) => /(^|\/)gatehouse:/.test(String(image));
  const fleets: Array<{ where: string; replicas: number; config: string }> = [];
  for (const { path, text } of deployFiles().filter((f) => /\.ya?ml$/.test(f.path))) {
    const docs = parseAllDocuments(text).map((doc) => (doc.toJS() ?? {}) as Json);
    for (const doc of docs.filter((d) => ["Deployment", "StatefulSet"].includes(String(d.kind)))) {
      const spec = doc.spec as { replicas?: number; template: { spec: typeof pod } };
      const container = spec.template.spec.containers.find((c) => isGatehouse(c.image));
      if (container === undefined) continue;
      const mount = container.volumeMounts?.find((m) => m.mountPath === "/etc/gatehouse");
      const volume = spec.template.spec.volumes.find((v) => v.name === mount?.name);
      const mapName = (volume?.configMap as { name?: string } | undefined)?.name;
      const map = docs.find((d) => d.kind === "ConfigMap" && (d.metadata as Json).name === mapName);
      fleets.push({
        where: `${path} ${(doc.metadata as Json).name as string}`,
        replicas: spec.replicas ?? 1,
        config: (map?.data as Record<string, string> | undefined)?.[configName] ?? "",
      });
    }
    const services = (docs[0]?.services ?? {}) as typeof compose.services;
    for (const [name, service] of Object.entries(services)) {
      if (!isGatehouse(service.image)) continue;
      const mount = (service.volumes ?? []).find((v) => v.split(":")[1] === "/etc/gatehouse");
      const folder = resolve(dirname(path), (mount ?? "").split(":")[0] as string);
      fleets.push({
        where: `${path} ${name}`,
        replicas: ((service.deploy as Json | undefined)?.replicas as number | undefined) ?? 1,
        config: readFileSync(join(folder, configName), "utf8"),
      });
    }
  }
  return fleets;
}

// With the memory store each replica counts alone: N replicas would allow N times every plan.
t.test("every example that runs more than one replica counts in Redis", async (t) => {
  const fleets = gatehouseFleets();
  t.ok(fleets.length >= 2, fleets.map((f) => f.where).join(", "));
  for (const { where, replicas, config } of fleets) {
    t.not(config, "", `${where}: its config is found`);
    const store = parseConfigText(config, where).file.limits.store;
    t.ok(replicas <= 1 || store === "redis", `${where}: ${replicas} replicas, store ${store}`);
  }
  t.ok(fleets.some((f) => f.where.startsWith("deploy/kubernetes.yaml") && f.replicas > 1));
});

t.test("kubernetes: the replicas count in Redis, its password from a Secret", async (t) => {
  const redis = kubeConfig.limits.redis;
  t.equal(kubeConfig.limits.store, "redis");
  t.not(redis.password_env, "", "a password, never written in the ConfigMap");
  const ref = (gatehouseContainer.env ?? []).find((v) => v.name === redis.password_env)?.valueFrom
    ?.secretKeyRef as { name: string; key: string } | undefined;
  t.ok(ref, `${redis.password_env} comes from a secretKeyRef`);
  t.match(
    manifestText,
    new RegExp(`^# +kubectl create secret generic ${ref?.name} .*--from-literal=${ref?.key}=`, "m"),
  );
  t.equal(redis.on_outage, "local");
  // The URL names the stand-in's Service and port; the stand-in reads the same Secret key.
  const url = new URL(redis.url ?? "");
  const service = manifests.find(
    (m) => m.kind === "Service" && (m.metadata as Json).name === url.hostname,
  ) as { spec: { selector: Record<string, string>; ports: Array<{ port: number }> } };
  t.ok(service, `a Service ${url.hostname}`);
  t.ok(
    service.spec.ports.some((p) => p.port === Number(url.port)),
    `on port ${url.port}`,
  );
  const standIn = standInRedis();
  t.match(standIn.labels, service.spec.selector, "the Service selects the stand-in's pod");
  t.strictSame(
    standIn.container.env?.find((v) => v.name === "REDIS_PASSWORD")?.valueFrom?.secretKeyRef,
    ref,
  );
});

/** The stand-in Redis Deployment's pod: its labels and its one container. */
function standInRedis(): { labels: Json; container: Container & { args: string[] } } {
  const redisDeployment = manifests.find(
    (m) =>
      m.kind === "Deployment" &&
      (m.spec as { template: { spec: typeof pod } }).template.spec.containers.some((c) =>
        String(c.image).startsWith("redis:"),
      ),
  ) as { spec: { template: { metadata: Json; spec: typeof pod } } };
  const template = redisDeployment.spec.template;
  return {
    labels: template.metadata.labels as Json,
    container: template.spec.containers[0] as Container & { args: string[] },
  };
}

/**
 * A redis-server started with the stand-in's own arguments, the password given as Kubernetes
 * would, on a free loopback port.
 */
async function startStandInRedis(t: Test) {
  const password = "deploy-test-redis-password-91c4";
  const { args } = standInRedis().container;
  const [command, ...options] = args.map((arg) => arg.replace("$(REDIS_PASSWORD)", password));
  t.equal(command, "redis-server");
  const port = await refusingPort();
  const child = await launchRedis([...options, ...serverArgs(port)], () => answers(port));
  t.teardown(() => stopProcess(child, "SIGKILL"));
  return {
    port,
    password,
    url: `redis://127.0.0.1:${port}`,
    env: { [kubeConfig.limits.redis.password_env]: password },
  };
}

t.test("kubernetes: two replicas of the ConfigMap's config share one limit in Redis", async (t) => {
  const redis = await startStandInRedis(t);
  t.equal(
    await redisCli(redis.port, ["PING"]),
    "NOAUTH Authentication required.",
    "the stand-in wants its password",
  );
  const [first, second] = (await startReplicas(
    t,
    configMapText as string,
    2,
    redis.url,
    redis.env,
  )) as [CliProcess, CliProcess];
  const token = await obtainToken(first.url, CLIENT);
  const headers = { authorization: `Bearer ${token}` };
  t.equal((await fetch(`${second.url}/v1/items`, { headers })).status, 200);
  const own = await fetch(`${first.url}/v1/items`, { headers });
  t.equal(own.headers.get("x-ratelimit-limit"), "100");
  t.equal(Number(own.headers.get("x-ratelimit-remaining")), 98, "the other pod's request counted");
  const keys = await redisCli(
    redis.port,
    ["--scan", "--pattern", `${kubeConfig.limits.redis.key_prefix}{client:${CLIENT.id}}:*`],
    redis.password,
  );
  t.ok(keys.split("\n").length >= 2, `the rate limit and the quota are in Redis: ${keys}`);
});

// docs/benchmark.md's Footprint figures are MB of /proc's kB divided by 1024, so MiB; Mi is 2^20 bytes.
t.test(
  "the gatehouse container's memory limit is 1.5x the RSS docs/benchmark.md measured after load",
  async (t) => {
    const footprint = section(readManual("docs/benchmark.md"), "Footprint");
    const header = footprint.split("\n").find((l) => l.startsWith("| Node")) ?? "";
    const column = header
      .split("|")
      .map((cell) => cell.trim())
      .findIndex((cell) => cell.startsWith("RSS after"));
    const row = footprint.split("\n").find((l) => /^\| 24\./.test(l)) ?? "";
    const afterLoad = Number(/([\d.]+) MB/.exec(row.split("|")[column] ?? "")?.[1]);
    t.ok(afterLoad > 100, `docs/benchmark.md's Node 24 figure after load: ${afterLoad} MB`);
    const units: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };
    const mib = (quantity: unknown) => {
      const [, amount, unit] = /^(\d+)(Ki|Mi|Gi)$/.exec(String(quantity)) ?? [];
      return (Number(amount) * (units[unit as string] as number)) / 2 ** 20;
    };
    const limit = mib(gatehouseContainer.resources?.limits?.memory);
    const request = mib(gatehouseContainer.resources?.requests?.memory);
    t.ok(limit >= 1.5 * afterLoad, `limit ${limit} MiB >= 1.5 x ${afterLoad} MiB`);
    t.ok(request >= afterLoad, `request ${request} MiB holds the after-load figure`);
    t.match(manifestText, /--scenario footprint/, "the manifest says where the figures come from");
    t.match(manifestText, new RegExp(`${afterLoad} MB`), "and quotes them");
  },
);

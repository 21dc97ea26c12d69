/**
 * The deployment examples: the Kubernetes manifest against the Kubernetes API's schemas (offline,
 * from kubernetes-models) and the habits a production manifest needs; the docker-compose file
 * parsed; and the gatehouse config of each started as a process, with a Redis server of the
 * test's own and the signing key the example names.
 */
import { spawnSync } from "node:child_process";
import { readFile, mkdtemp, writeFile } from "node:fs/promises";
import { statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import t, { type Test } from "tap";
import { parse, parseAllDocuments, parseDocument } from "yaml";
import { durationMs } from "../src/config/duration.js";
import { parseConfigText } from "../src/config/load.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { startCli, type CliProcess } from "./helpers/cli.js";
import { startTestRedis } from "./helpers/redis.js";
import { obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

type Json = Record<string, unknown>;
interface Container extends Json {
  name: string;
  securityContext?: Json & { capabilities?: { drop?: string[] } };
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources?: { requests?: Json; limits?: Json };
  env?: Array<{ name: string; valueFrom?: { secretKeyRef?: { name: string } } }>;
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
  (broken.spec.template.spec.securityContext as Json).runAsUser = "node";
  t.throws(() => new Deployment(broken as never).validate(), /runAsUser must be integer/);
});

t.test("the pod runs as a numeric non-root user, each container locked down", async (t) => {
  t.match(pod.securityContext, { runAsNonRoot: true, runAsUser: Number });
  t.not((pod.securityContext as Json).runAsUser, 0);
  for (const container of pod.containers) {
    t.match(
      container.securityContext,
      { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true },
      container.name,
    );
    t.strictSame(container.securityContext?.capabilities?.drop, ["ALL"], container.name);
    t.ok(container.resources?.requests?.memory, `${container.name} requests memory`);
    t.ok(container.resources?.limits?.memory, `${container.name} has a memory limit`);
  }
});

t.test("probes use gatehouse's health paths on its port", async (t) => {
  const probes = gatehouseContainer as Container & Record<string, { httpGet?: Json }>;
  t.match(probes.readinessProbe?.httpGet, { path: kubeConfig.health.readiness_path, port: "http" });
  t.match(probes.livenessProbe?.httpGet, { path: kubeConfig.health.liveness_path, port: "http" });
  t.match(probes.startupProbe?.httpGet, { path: kubeConfig.health.liveness_path });
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

/**
 * `text` with the addresses of this machine: listeners on port 0, the test's upstream and Redis,
 * and the key file at `keyFile`; everything else as the example has it.
 */
function localConfig(text: string, local: { upstream: string; redis?: string; keyFile: string }) {
  const doc = parseDocument(text);
  doc.setIn(["listen"], "127.0.0.1:0");
  doc.setIn(["admin_listen"], "127.0.0.1:0");
  doc.setIn(["upstream", "url"], local.upstream);
  if (local.redis !== undefined) doc.setIn(["limits", "redis", "url"], local.redis);
  doc.setIn(["tokens", "signing", "key_file"], local.keyFile);
  return doc.toString();
}

const CLIENT = { id: "reporting-app", secret: "deploy-test-client-secret-2b7c" };

async function startReplicas(
  t: Test,
  text: string,
  count: number,
  redis?: string,
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
    const replica = await startCli(["--config", config], { REPORTING_APP_SECRET: CLIENT.secret });
    t.teardown(() => replica.stop("SIGTERM"));
    replicas.push(replica);
  }
  return replicas;
}

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
});

t.test("kubernetes: the ConfigMap's config serves with the key the Secret mounts", async (t) => {
  const [replica] = (await startReplicas(t, configMapText as string, 1)) as [CliProcess];
  const token = await obtainToken(replica.url, CLIENT);
  const answer = await fetch(`${replica.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(answer.status, 200);
  t.equal((await fetch(`${replica.url}${kubeConfig.health.readiness_path}`)).status, 200);
});

import { readFile } from "node:fs/promises";
import t from "tap";
import { parseAllDocuments } from "yaml";
import { parseConfigText } from "../src/config/load.js";

// The deployment examples carry gatehouse configs of their own; they must stay valid as the
// schema evolves.
t.test("the Kubernetes ConfigMap holds a valid gatehouse config", async (t) => {
  const docs = parseAllDocuments(await readFile("deploy/kubernetes.yaml", "utf8"));
  const configMap = docs
    .map((doc) => doc.toJS() as Record<string, unknown>)
    .find((d) => d.kind === "ConfigMap");
  const text = (configMap?.data as Record<string, string>)["proxy.config.yaml"] as string;
  const { file } = parseConfigText(text, "deploy/kubernetes.yaml#proxy.config.yaml");
  t.equal(file.limits.store, "memory");
  t.equal(file.upstream.url, "http://127.0.0.1:3000");
});

t.test("the docker-compose example config is valid", async (t) => {
  const text = await readFile("deploy/compose/proxy.config.yaml", "utf8");
  const { file } = parseConfigText(text, "deploy/compose/proxy.config.yaml");
  t.equal(file.upstream.url, "http://legacy:3000");
});

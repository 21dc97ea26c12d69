/**
 * The shipped example, proxy.config.yaml, does what it says, through real sockets: reporting-app
 * reads items and is refused their writes (403 insufficient_scope), inventory-app writes them. And
 * `gatehouse token check` on a token of the example prints the blocks docs/cli.md shows, run as
 * the chapter runs it, so that the chapter cannot drift from the example.
 */
import { readFile } from "node:fs/promises";
import t from "tap";
import { loadSnapshot } from "../src/config/snapshot.js";
import { issueToken } from "../src/tokens/issue.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { runCli } from "./helpers/cli.js";
import { json, send } from "./helpers/client.js";
import { readManual } from "./helpers/docs.js";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { demoClients, localConfig } from "./helpers/shipped-config.js";
import { obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const EXAMPLE = await readFile("proxy.config.yaml", "utf8");
const [reporting, inventory] = demoClients(EXAMPLE);
// The example with a signing key (docs/cli.md's token check reads it), where this test listens.
const KEY_FILE = "keys/signing.pem";

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  localConfig(EXAMPLE, { upstream: upstream.url, keyFile: `./${KEY_FILE}` }),
  { files: { [KEY_FILE]: await generateKeyPem("EdDSA") } },
);
t.teardown(() => g.close());

function call(method: string, path: string, token: string) {
  return send(`${g.url}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
}

t.test("reporting-app reads items and cannot write them; inventory-app writes them", async (t) => {
  t.equal(reporting?.id, "reporting-app");
  t.equal(inventory?.id, "inventory-app");
  const reader = await obtainToken(g.url, reporting as NonNullable<typeof reporting>);
  const writer = await obtainToken(g.url, inventory as NonNullable<typeof inventory>);

  t.equal((await call("GET", "/v1/items", reader)).status, 200);
  t.equal((await call("GET", "/v1/items/x", reader)).status, 200);
  const forwarded = upstream.received.length;
  for (const method of ["PUT", "DELETE"]) {
    const refused = await call(method, "/v1/items/x", reader);
    t.equal(refused.status, 403, `${method} by reporting-app`);
    t.match(refused.headers["www-authenticate"], /error="insufficient_scope"/);
    t.match(json(refused), { error: "insufficient_scope", scope: "items:write" });
  }
  t.equal(upstream.received.length, forwarded, "the refused writes never reached the upstream");

  for (const method of ["GET", "PUT", "DELETE"]) {
    t.equal((await call(method, "/v1/items/x", writer)).status, 200, `${method} by inventory-app`);
    t.match(upstream.received.at(-1), { method, headers: { "x-client-id": "inventory-app" } });
  }
  t.equal((await call("GET", "/v1/reports/2026", writer)).status, 403, "it has no reports:read");
});

/** The fenced block of docs/cli.md whose first line is `$ COMMAND...`: the command and output. */
function shownRun(markdown: string, command: RegExp): { args: string[]; output: string } {
  const blocks = markdown.split(/^```.*$/m).filter((_, index) => index % 2 === 1);
  const block = blocks.find((text) => command.test(text.split("\n")[1] ?? ""));
  if (block === undefined) throw new Error(`docs/cli.md shows no run of ${command}`);
  const [, first = "", ...output] = block.split("\n");
  const args = first.replace(/^.*\| gatehouse /, "").split(" ");
  return { args, output: output.join("\n") };
}

/** Output with what differs from run to run written as its kind: key ids, times, token ids. */
function unvarying(output: string): string {
  return output
    .replace(/kid [A-Za-z0-9_-]{43}\b/g, "kid <kid>")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \((now|in [^)]+|[^)]+ ago)\)/g, "<time>")
    .replace(/^jti( +)[0-9a-f-]{36}$/m, "jti$1<jti>");
}

t.test("token check prints what docs/cli.md shows for a token of the example", async (t) => {
  const manual = readManual("docs/cli.md");
  const shown = shownRun(manual, /^\$ echo "\$TOKEN" \| gatehouse token check /);
  const token = await obtainToken(g.url, reporting as NonNullable<typeof reporting>);
  const run = await runCli(shown.args, { GATEHOUSE_CONFIG: "" }, token, g.dir);
  t.equal(run.status, 0);
  t.equal(unvarying(run.stdout), unvarying(shown.output));

  // "The same token an hour later ends with": one signed as gatehouse signs, an hour and more ago.
  const later = manual.slice(manual.indexOf("The same token an hour later ends with"));
  const ending = /```\n([\s\S]*?)```/.exec(later)?.[1] ?? "";
  t.not(ending, "", "docs/cli.md shows how the report ends");
  const snapshot = await loadSnapshot(g.configPath, { env: {} });
  const grant = { scope: "items:read reports:read", audience: "upstream" };
  const old = await issueToken(snapshot.tokens, "reporting-app", Date.now() - 2 * 3600_000, grant);
  const expired = await runCli(shown.args, { GATEHOUSE_CONFIG: "" }, old.token, g.dir);
  t.equal(expired.status, 1);
  t.ok(expired.stdout.endsWith(ending), "the report ends as shown");
});

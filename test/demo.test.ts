import { spawn } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { refusingPort } from "./helpers/ports.js";

// `npm run demo` must work as printed: its token request and its protected call succeed.
t.test("the demo serves the example config and its curl lines work", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-demo-"));
  const config = join(dir, "proxy.config.yaml");
  const example = await readFile("proxy.config.yaml", "utf8");
  await writeFile(
    config,
    example
      .replace(/^listen: \S+/m, "listen: 127.0.0.1:0")
      .replace(/^ {2}url: \S+/m, `  url: http://127.0.0.1:${await refusingPort()}`)
      .replace(/^admin_listen: \S+/m, "admin_listen: 127.0.0.1:0")
      .replace(/^logging:\n {2}level: info/m, "logging:\n  level: warn"),
  );
  const demo = spawn(process.execPath, ["dist/src/demo.js"], {
    env: { ...process.env, GATEHOUSE_CONFIG: config },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<number | null>((done) => demo.once("exit", (code) => done(code)));
  let printed = "";
  await new Promise<void>((done, fail) => {
    demo.stderr.on("data", (chunk: Buffer) => {
      printed += chunk.toString("utf8");
      if (printed.includes("Ctrl-C stops the demo.")) done();
    });
    void exited.then((code) => fail(new Error(`demo exited with ${code}: ${printed}`)));
  });
  const base = /gatehouse is listening on (http:\/\/\S+),/.exec(printed)?.[1] as string;
  const credentials = /curl -s -u (\S+):(\S+) -d/.exec(printed);
  t.ok(credentials, "the demo prints the client credentials to use");
  const [, id = "", secret = ""] = credentials ?? [];

  t.match(printed, /in front of the example upstream on http:\/\/127\.0\.0\.1:\d+\./);
  t.notMatch(printed, /:3000/, "the upstream is where the config points, not a fixed port");
  t.equal((await fetch(`${base}/status`)).status, 200);
  const tokenResponse = await fetch(`${base}/oauth/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "grant_type=client_credentials",
  });
  t.equal(tokenResponse.status, 200);
  const { access_token: token } = (await tokenResponse.json()) as { access_token: string };
  const items = await fetch(`${base}/v1/items?translation_language=DE,it-CH`, {
    headers: { authorization: `Bearer ${token}`, "accept-language": "fr-CA,fr;q=0.9" },
  });
  t.equal(items.status, 200);
  t.strictSame(await items.json(), {
    method: "GET",
    url: "/v1/items?translation_language=de,it",
    client: "reporting-app",
    language: "fr",
  });
  t.equal((await fetch(`${base}/v1/items`)).status, 401);
  demo.kill("SIGTERM");
  t.equal(await exited, 0);
});

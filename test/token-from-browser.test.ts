/**
 * A page in headless Chromium opens authenticated WebSockets through gatehouse as a browser user's
 * would: a browser cannot set Authorization on a handshake, so the page sends its token in the
 * URI, as a subprotocol, or in a cookie. A page of a site the route does not list is refused, with
 * the user's cookie and all. Chromium is Debian's, installed where the machine lacks it.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { chromium, type Page } from "playwright-core";
import { ensureDebianPackage } from "./helpers/debian.js";
import { APP, startTokenFromRig } from "./helpers/token-from.js";

// Installed before the suite runs (test/install-programs.ts) where the machine lacks it.
const executablePath = ensureDebianPackage("chromium", "chromium");

// The page a user's browser loads: it opens a socket, sends one message and reports what came back.
const PAGE = `<!doctype html><title>gatehouse</title><script>
window.echo = (url, protocols) => new Promise((resolve) => {
  const ws = new WebSocket(url, protocols);
  ws.onopen = () => ws.send("ping");
  ws.onmessage = (event) => {
    resolve({ opened: true, data: event.data, protocol: ws.protocol });
    ws.close();
  };
  ws.onclose = (event) => resolve({ opened: false, code: event.code });
});
</script>`;

async function servePage(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((done) => server.close(() => done())),
  };
}

const site = await servePage();
t.teardown(() => site.close());
// Another site's page: the same host on another port is the same site for cookies (RFC 6265
// §8.5), so the browser sends the user's cookie along, but its Origin is its own.
const other = await servePage();
t.teardown(() => other.close());

const { g, upstream, token, ws, lastHandshake } = await startTokenFromRig(t, site.origin);

const profile = await mkdtemp(join(tmpdir(), "gatehouse-chromium-"));
t.teardown(() => rm(profile, { recursive: true, force: true }));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  // This machine's network is closed: Chromium's own background connections only fail.
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
t.teardown(() => browser.close());

async function open(origin: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(origin);
  return page;
}

type Echo = { opened: true; data: string; protocol: string } | { opened: false; code: number };
const echo = (page: Page, url: string, protocols: string[] = []): Promise<Echo> =>
  page.evaluate(
    ([u, p]) =>
      (globalThis as unknown as { echo(u: string, p: string[]): Promise<Echo> }).echo(u, p),
    [url, protocols] as const,
  );

t.test("without Authorization a page's handshake is refused", async (t) => {
  const page = await open(site.origin);
  t.same(await echo(page, ws("/feed")), { opened: false, code: 1006 });
});

t.test("the token in the URI: the socket opens, the upstream never sees it", async (t) => {
  const page = await open(site.origin);
  const answer = await echo(page, ws(`/feed?access_token=${token}&room=7`));
  t.same(answer, { opened: true, data: "ping", protocol: "" });
  t.equal(lastHandshake().url, "/feed?room=7");
  t.equal(lastHandshake().headers["x-client-id"], APP.id);
});

t.test("the token as a subprotocol beside the page's own", async (t) => {
  const page = await open(site.origin);
  const answer = await echo(page, ws("/feed"), [`bearer.${token}`, "chat.v2"]);
  t.same(answer, { opened: true, data: "ping", protocol: "chat.v2" });
  t.equal(lastHandshake().headers["sec-websocket-protocol"], "chat.v2");
});

t.test("the token in a cookie, from a page of the listed site", async (t) => {
  const page = await open(site.origin);
  // As the page's own script stores a token it was given.
  await page.evaluate(
    `document.cookie = "gh_token=${token}; path=/"; document.cookie = "theme=dark; path=/"`,
  );
  t.same(await echo(page, ws("/session")), { opened: true, data: "ping", protocol: "" });
  const seen = lastHandshake();
  t.equal(seen.headers.origin, site.origin);
  t.equal(seen.headers.cookie, "theme=dark", "the upstream gets the other cookies only");
});

t.test("another site's page, with the user's cookie, is refused", async (t) => {
  const handshakes = upstream.handshakes.length;
  const page = await open(other.origin);
  t.same(await echo(page, ws("/session")), { opened: false, code: 1006 });
  t.equal(upstream.handshakes.length, handshakes, "nothing reached the upstream");
  const refused = g.logs.find((line) => line.path === "/session" && line.status === 403);
  t.ok(refused, "gatehouse refused it 403");
  t.notOk(JSON.stringify(g.logs).includes(token), "no log line carries the token");
});

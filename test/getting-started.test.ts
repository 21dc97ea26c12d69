/**
 * docs/getting-started.md, run as a reader runs it: its shell blocks in one bash session in an
 * empty folder, gatehouse started by the page's own command, in front of a real upstream that
 * answers plain requests as the page's stand-in does and echoes WebSockets. What a block prints is
 * compared with the output the page shows after it, and what the page promises is checked where
 * it happens: at the upstream and in gatehouse's log.
 *
 * The page's blocks are plain commands. An HTML comment before a block, which a reader of the
 * rendered page does not see, says what to do with it:
 * - `test: setup`: the block that names the places; the test puts its own in its assignments (this
 *   clone, the upstream, free ports), as the page has a reader whose ports are taken do.
 * - `test: stand-in`: the stand-in service, run by a test of its own below.
 * - `test: gatehouse`: the command that runs gatehouse in the reader's second terminal; started
 *   here as a process of its own, and waited for until it listens.
 * - `test: reload`: a block that changes the config; the test waits until gatehouse applied it.
 * - `test: output` (or `test: output; varies: 3600`): the output of the shell block before it;
 *   `...` stands for any text within its line, and each number after `varies:` for any number.
 * Every other shell block is run as it is.
 */
import { mkdtemp, rm } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import t, { type Test } from "tap";
import { startCli, type CliProcess } from "./helpers/cli.js";
import { eventually, send } from "./helpers/client.js";
import { ensureDebianPackage } from "./helpers/debian.js";
import { fencedBlocks, readManual, type FencedBlock } from "./helpers/docs.js";
import { refusingPort } from "./helpers/ports.js";
import { startShell, type Shell } from "./helpers/shell.js";
import { startWsUpstream } from "./helpers/websocket.js";

// The page's reader runs curl and openssl; installed before the suite runs where the machine lacks
// them (test/install-programs.ts).
ensureDebianPackage("curl", "curl");
ensureDebianPackage("openssl", "openssl");

const PAGE = "docs/getting-started.md";
const PLACES = ["CLONE", "SERVICE", "PORT", "ADMIN_PORT"] as const;
type Places = Record<(typeof PLACES)[number], string>;

// What the page's stand-in answers: the request's method and path.
function standIn(req: IncomingMessage, res: ServerResponse): void {
  res.end(`${req.method} ${req.url}`);
}

/** The blocks of the page, and the one whose note is `test: NOTE`. */
function pageBlocks(): { blocks: FencedBlock[]; noted(note: string): FencedBlock } {
  const blocks = fencedBlocks(readManual(PAGE));
  return {
    blocks,
    noted(note) {
      const found = blocks.filter((block) => block.note === `test: ${note}`);
      if (found.length !== 1) throw new Error(`${PAGE} has ${found.length} "${note}" blocks`);
      return found[0] as FencedBlock;
    },
  };
}

/** The setup block with `ours` assigned in it, and the values the page assigns. */
function setUp(block: string, ours: Places): { script: string; theirs: Places } {
  const theirs = { ...ours };
  let script = block;
  for (const name of PLACES) {
    const assignment = new RegExp(`^${name}=(\\S+)`, "gm");
    const found = [...block.matchAll(assignment)];
    if (found.length !== 1) throw new Error(`${PAGE} assigns ${name} ${found.length} times`);
    theirs[name] = found[0]?.[1] as string;
    script = script.replace(assignment, `${name}='${ours[name]}'`);
  }
  return { script, theirs };
}

/** What a block printed as the page would show it: with the page's places for ours. */
function asShown(printed: string, ours: Places, theirs: Places): string {
  return printed
    .replace(/\r/g, "")
    .replaceAll(ours.SERVICE, theirs.SERVICE)
    .replaceAll(`127.0.0.1:${ours.PORT}`, `127.0.0.1:${theirs.PORT}`)
    .replaceAll(`127.0.0.1:${ours.ADMIN_PORT}`, `127.0.0.1:${theirs.ADMIN_PORT}`)
    .replace(/\n$/, "");
}

/** The outputs an output block and its note stand for, as one pattern. */
function shownPattern(shown: string, note: string): RegExp {
  const varies = /; varies: (.+)$/.exec(note)?.[1]?.split(/\s+/) ?? [];
  let source = shown
    .replace(/\n$/, "")
    .replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    .replaceAll("\\.\\.\\.", "[^\\n]*?");
  for (const number of varies) {
    source = source.replace(new RegExp(`(?<!\\d)${number}(?!\\d)`, "g"), "\\d+");
  }
  return new RegExp(`^${source}$`);
}

/** The shell the page's commands run in: the `node` on its PATH is the one running the test. */
function pageShell(dir: string): Shell {
  const path = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`;
  return startShell(dir, { ...process.env, PATH: path });
}

/** Starts gatehouse by the page's command, `./gatehouse run ...`, in `dir`. */
function startGatehouse(block: FencedBlock, dir: string): Promise<CliProcess> {
  const [command, ...args] = block.text.trim().split(/\s+/);
  if (command !== "./gatehouse") throw new Error(`${PAGE} starts gatehouse with ${command}`);
  return startCli(args, {}, dir, join(dir, "gatehouse"));
}

/** What walking through the page came to. */
interface Walked {
  /** What each shell block printed, as shown, in order. */
  readonly printed: string[];
  /** How many of `printed` came before the reload. */
  readonly reloadedAfter: number;
  /** gatehouse's log line about the reload. */
  readonly reload: Record<string, unknown>;
}

/** Runs the page's blocks in order, comparing each output block with what was printed. */
async function walk(
  t: Test,
  shell: Shell,
  ours: Places,
  started: { gatehouse?: CliProcess; dir: string },
): Promise<Walked> {
  const { blocks } = pageBlocks();
  let theirs: Places | undefined;
  const printed: string[] = [];
  // What the last block printed, for the output block after it; none for a command run apart.
  let last: string | undefined;
  let reload: Record<string, unknown> = {};
  let reloadedAfter = -1;
  for (const block of blocks) {
    const note = block.note?.replace(/^test: /, "") ?? "";
    if (block.info !== "sh") {
      t.match(note, /^output(; varies: [\d ]+)?$/, `a block that is no command is an output`);
      const command = blocks[blocks.indexOf(block) - 1]?.text.split("\n")[0];
      const shown = shownPattern(block.text, note);
      t.match(last, shown, `the page shows what ${command} ... printed`);
    } else if (note === "setup") {
      const setup = setUp(block.text, ours);
      theirs = setup.theirs;
      last = asShown(await shell.run(setup.script), ours, theirs);
      printed.push(last);
    } else if (note === "gatehouse" || note === "stand-in") {
      last = undefined;
      if (note === "gatehouse") started.gatehouse = await startGatehouse(block, started.dir);
    } else {
      if (theirs === undefined) throw new Error(`${PAGE} runs a command before its setup`);
      last = asShown(await shell.run(block.text), ours, theirs);
      printed.push(last);
    }
    if (note !== "reload") continue;
    const gatehouse = started.gatehouse;
    if (gatehouse === undefined) throw new Error(`${PAGE} reloads before gatehouse runs`);
    const isReload = (line: Record<string, unknown>) =>
      String(line.msg).startsWith("config reload");
    t.ok(await eventually(() => gatehouse.lines().some(isReload)), "gatehouse reads the edit");
    reload = gatehouse.lines().find(isReload) ?? {};
    reloadedAfter = printed.length;
  }
  return { printed, reloadedAfter, reload };
}

t.test("the walkthrough, run as written, does what it says", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-getting-started-"));
  const upstream = await startWsUpstream({}, standIn);
  const port = await refusingPort();
  let adminPort = await refusingPort();
  while (adminPort === port) adminPort = await refusingPort();
  const ours = {
    CLONE: process.cwd(),
    SERVICE: upstream.url,
    PORT: `${port}`,
    ADMIN_PORT: `${adminPort}`,
  };
  const shell = pageShell(dir);
  const started: { gatehouse?: CliProcess; dir: string } = { dir };
  t.teardown(async () => {
    await shell.close();
    await started.gatehouse?.stop("SIGTERM");
    await upstream.close();
    await rm(dir, { recursive: true, force: true });
  });
  const { printed, reloadedAfter, reload } = await walk(t, shell, ours, started);
  const before = printed.slice(0, reloadedAfter).join("\n");
  const after = printed.slice(reloadedAfter).join("\n");

  const read = upstream.plain.find((req) => req.method === "GET" && req.url === "/v1/items/42");
  t.equal(read?.headers["x-client-id"], "reader", "the upstream is told the client");
  t.equal(read?.headers["x-client-scopes"], "items:read");
  t.equal(read?.headers.authorization, undefined, "and never sees the token");
  const writers = upstream.plain.filter((req) => req.method === "PUT");
  t.strictSame(
    writers.map((req) => req.headers["x-client-id"]),
    ["writer"],
    "the reader's write never reaches the upstream",
  );
  t.match(before, /^\{"error":"insufficient_scope".* 403$/m, "the reader's write is 403");
  t.match(before, /^x-ratelimit-limit: 5$/m);
  t.match(before, /^429$/m, "the reader's plan runs out");

  t.equal(reload.msg, "config reloaded", "the edit is applied while gatehouse runs");
  const limits = (reload.changed as { limits?: unknown } | undefined)?.limits;
  t.ok(readManual(PAGE).includes(`"limits":${JSON.stringify(limits)}`), "as the page says");
  t.match(after, /^x-ratelimit-limit: 10$/m, "the new limit applies");

  t.match(after, /^open\nopen\nrefused$/m, "a WebSocket opens with the token, in either place");
  t.strictSame(
    upstream.handshakes.map((req) => [
      req.url,
      req.headers.authorization,
      req.headers["x-client-id"],
    ]),
    [
      ["/v1/live", undefined, "reader"],
      ["/v1/live", undefined, "reader"],
    ],
    "the upstream gets each handshake without the token",
  );
});

t.test("the page's stand-in answers as the upstream above does", async (t) => {
  const { noted } = pageBlocks();
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-stand-in-"));
  const service = `http://127.0.0.1:${await refusingPort()}`;
  const shell = pageShell(dir);
  t.teardown(async () => {
    await shell.close();
    await rm(dir, { recursive: true, force: true });
  });
  const ours = { CLONE: process.cwd(), SERVICE: service, PORT: "8080", ADMIN_PORT: "9901" };
  await shell.run(setUp(noted("setup").text, ours).script);
  await shell.run(noted("stand-in").text);
  const answered = () =>
    send(`${service}/`).then(
      () => true,
      () => false,
    );
  t.ok(await eventually(answered), "the stand-in listens where SERVICE says");
  for (const [method, path] of [
    ["GET", "/v1/items/42"],
    ["PUT", "/v1/items/42"],
    ["DELETE", "/v1/items?all=1"],
  ] as const) {
    const response = await send(`${service}${path}`, { method, body: '{"name":"first"}' });
    t.equal(response.status, 200);
    t.equal(response.body.toString("utf8"), `${method} ${path}`);
  }
});

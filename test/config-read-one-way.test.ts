/**
 * A config file is read one way (docs/configuration.md): `check`, a start and a
 * reload accept or refuse each file alike, with the same problems at the same lines, and a typo
 * on a line of its own adds exactly its own problem to what the rest of the file gets (nothing to
 * a file that is not well-formed YAML, which is refused for that alone).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import t, { type Test } from "tap";
import { ConfigError } from "../src/config/load.js";
import { loadSnapshot } from "../src/config/snapshot.js";
import { startGatehouse } from "../src/server.js";
import { runCli } from "./helpers/cli.js";
import { configJsonSchema } from "../src/config/json-schema.js";
import { memoryLogger } from "./helpers/gatehouse.js";

/** Accepted, or refused with these problems (`LINE:COL message`, the file name left out). */
type Verdict = { readonly accepted: boolean; readonly problems: readonly string[] };

// Each case runs the command twice and the property a dozen times more; a process start takes
// seconds on a loaded machine.
t.setTimeout(300_000);
const dir = await mkdtemp(join(tmpdir(), "gatehouse-one-way-"));
t.teardown(() => rm(dir, { recursive: true, force: true }));

function verdict(path: string, accepted: boolean, lines: readonly string[]): Verdict {
  const problems = lines
    .filter((l) => l.startsWith(`${path}:`))
    .map((l) => l.slice(path.length + 1));
  return { accepted, problems };
}

/** What `gatehouse check` says of `text`. */
async function byCheck(text: string): Promise<Verdict> {
  const path = join(dir, "check.yaml");
  await writeFile(path, text);
  const { status, stderr } = await runCli(["check", "--config", path]);
  return verdict(path, status === 0, stderr.split("\n"));
}

/** What reading `text` the way a start does says of it. */
async function byLoad(text: string): Promise<Verdict> {
  const path = join(dir, "load.yaml");
  await writeFile(path, text);
  try {
    await loadSnapshot(path, { env: process.env });
    return { accepted: true, problems: [] };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return verdict(path, false, error.message.split("\n"));
  }
}

/** What a start of gatehouse on `text` says of it. */
async function byStart(text: string): Promise<Verdict> {
  const path = join(dir, "start.yaml");
  await writeFile(path, text);
  try {
    const gatehouse = await startGatehouse({
      configPath: path,
      log: memoryLogger().log,
      watch: false,
      listen: { host: "127.0.0.1", port: 0 },
      adminListen: { host: "127.0.0.1", port: 0 },
    });
    await gatehouse.shutdown();
    return { accepted: true, problems: [] };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return verdict(path, false, error.message.split("\n"));
  }
}

const UPSTREAM = "upstream:\n  url: http://127.0.0.1:9\n";
const PLAIN = `${UPSTREAM}routes:\n  - path: /v1/items\n    methods: [GET, POST]\n    auth: none\n`;

// One gatehouse, started on a file none of the cases repeats, reloads each case in turn.
const reloadPath = join(dir, "reload.yaml");
await writeFile(reloadPath, `${UPSTREAM}routes:\n  - path: /first\n    methods: [GET]\n`);
const reloadLog = memoryLogger();
const reloading = await startGatehouse({
  configPath: reloadPath,
  log: reloadLog.log,
  watch: false,
  listen: { host: "127.0.0.1", port: 0 },
  adminListen: { host: "127.0.0.1", port: 0 },
});
t.teardown(() => reloading.shutdown());

/** What a reload of the running gatehouse on `text` says of it. */
async function byReload(text: string): Promise<Verdict> {
  await writeFile(reloadPath, text);
  const before = reloadLog.logs.length;
  const result = await reloading.reload("test");
  if (result !== "failure") return { accepted: true, problems: [] };
  const failed = reloadLog.logs.slice(before).find((l) => Array.isArray(l.problems));
  return verdict(reloadPath, false, (failed?.problems ?? []) as string[]);
}

/** `line` inserted as the file's first line, after a byte order mark if it has one. */
function withFirstLine(text: string, line: string): string {
  const bom = text.startsWith("\uFEFF") ? "\uFEFF" : "";
  return `${bom}${line}\n${text.slice(bom.length)}`;
}

/** The problems one line further down. */
function shifted(problems: readonly string[]): string[] {
  return problems.map((p) => p.replace(/^(\d+):/, (_, line: string) => `${Number(line) + 1}:`));
}

const TYPO = "upstraem_timeout: 5s";
// The top-level keys in the schema's order, as the unknown-key message lists them.
const TOP_LEVEL = Object.keys(
  (JSON.parse(configJsonSchema()) as { properties: Record<string, unknown> }).properties,
);
const TYPO_PROBLEM = `1:1 upstraem_timeout: unknown key (allowed here: ${TOP_LEVEL.join(", ")})`;
// A comment large enough that a reload parses the file on a worker thread (docs/operations.md,
// Reload).
const LARGE = `# ${"x".repeat(40 * 1024)}`;

// `malformed`: not well-formed YAML, which is refused for that alone (a typo elsewhere included).
const cases: Array<{
  what: string;
  text: string;
  accepted: boolean;
  first?: RegExp;
  malformed?: boolean;
}> = [
  { what: "a plain file", text: PLAIN, accepted: true },
  {
    what: "a flow sequence continued at its key's column",
    text: `${UPSTREAM}routes:\n  - path: /v1/items\n    methods: [GET,\n    POST]\n    auth: none\n`,
    accepted: false,
    first: /^6:5 YAML: Flow sequence in block collection must be sufficiently indented/,
    malformed: true,
  },
  {
    what: "a flow sequence continued past its key's column",
    text: `${UPSTREAM}routes:\n  - path: /v1/items\n    methods: [GET,\n      POST]\n    auth: none\n`,
    accepted: true,
  },
  {
    what: "CR-only line endings (a lone CR ends no line)",
    text: PLAIN.replaceAll("\n", "\r"),
    accepted: false,
    first: /^1:\d+ YAML: /,
    malformed: true,
  },
  { what: "CRLF line endings", text: PLAIN.replaceAll("\n", "\r\n"), accepted: true },
  { what: "a byte order mark", text: `\uFEFF${PLAIN}`, accepted: true },
  {
    what: "a tab as indentation",
    text: `upstream:\n\turl: http://127.0.0.1:9\n`,
    accepted: false,
    first: /^2:1 YAML: Tabs are not allowed as indentation$/,
    malformed: true,
  },
  { what: "a tab after a colon", text: `upstream:\n  url:\thttp://127.0.0.1:9\n`, accepted: true },
  {
    what: "a duplicate key",
    text: `${PLAIN}  - path: /v1/other\n    methods: [GET]\n    methods: [POST]\n`,
    accepted: false,
    first: /^9:5 duplicate key: each key may appear only once in a mapping$/,
    malformed: true,
  },
  {
    what: "a plan's name without its colon",
    text: `${UPSTREAM}clients:\n  - id: app\n    secret_env: HOME\n    plan: standard\nplans:\n  standard\n    rate_limit: { limit: 10, window: 1m }\n`,
    accepted: false,
    first: /^8:3 YAML: Implicit keys need to be on a single line$/,
    malformed: true,
  },
  {
    // Its key file is read after the schema refused it, on this thread (a large file is parsed
    // on a worker thread, which reads no file).
    what: "a refused file naming a missing key file",
    text: `${UPSTREAM}clients:\n  - id: batch\n    jwks_file: missing.jwks.json\nroutes:\n  - path: /v1/items\n    methods: [FETCH]\n`,
    accepted: false,
    first: /^5:16 clients\[0\]\.jwks_file: cannot read "missing\.jwks\.json" \(ENOENT\)$/,
  },
  {
    what: "an alias",
    text: `${UPSTREAM}plans:\n  standard: &limits\n    rate_limit: { limit: 10, window: 1m }\n  anonymous: *limits\n`,
    accepted: true,
  },
];

/** The three readers' verdicts on `text`, which must agree. */
async function agreed(t: Test, text: string, what: string): Promise<Verdict> {
  const check = await byCheck(text);
  t.strictSame(await byStart(text), check, `${what}: a start says what check says`);
  t.strictSame(await byReload(text), check, `${what}: a reload says what check says`);
  return check;
}

for (const { what, text, accepted, first, malformed = false } of cases) {
  t.test(what, async (t) => {
    const base = await agreed(t, text, "the file");
    t.equal(base.accepted, accepted, accepted ? "accepted" : "refused");
    if (first !== undefined) t.match(base.problems[0], first);
    const typo = await agreed(t, withFirstLine(text, TYPO), "with a typo");
    const typoProblems = malformed ? [] : [TYPO_PROBLEM];
    t.strictSame(typo, { accepted: false, problems: [...typoProblems, ...shifted(base.problems)] });
    // A large file is read on a worker thread by a reload, and on this thread by a start.
    const large = withFirstLine(text, LARGE);
    const expected = { accepted: base.accepted, problems: shifted(base.problems) };
    t.strictSame(await byReload(large), expected, "a large file, reloaded");
    t.strictSame(await byStart(large), expected, "a large file, started");
  });
}

t.test("random small files: check and the start's reading agree", async (t) => {
  // Each choice is mostly one a valid file makes, sometimes one that refuses it.
  const mostly = <T>(usual: readonly T[], unusual: readonly T[]) =>
    fc.oneof(
      { arbitrary: fc.constantFrom(...usual), weight: 4 },
      { arbitrary: fc.constantFrom(...unusual), weight: 1 },
    );
  const scalar = (text: string) => fc.constantFrom(text, `'${text}'`, `"${text}"`);
  const comment = fc.constantFrom("", " # why", "\t# after a tab");
  // methods: on one line, a block, or spread over lines past the key's column or at it.
  const methods = fc
    .tuple(
      fc.array(mostly(["GET", "POST", "PUT"], ["FETCH"]), { minLength: 1, maxLength: 3 }),
      mostly(["one line", "block", "past"], ["at the key"]),
    )
    .map(([names, style]) => {
      if (style === "one line") return [`    methods: [${names.join(", ")}]`];
      if (style === "block") return ["    methods:", ...names.map((n) => `      - ${n}`)];
      const continued = style === "past" ? "      " : "    ";
      return names.map(
        (n, i) =>
          `${i === 0 ? "    methods: [" : continued}${n}${i === names.length - 1 ? "]" : ","}`,
      );
    });
  const route = fc.tuple(methods, mostly(["", "none", "bearer"], ["nobody"]), comment);
  const file = fc
    .tuple(
      scalar("http://127.0.0.1:9"),
      fc.array(route, { minLength: 1, maxLength: 3 }),
      mostly(["\n", "\r\n"], ["\r"]),
      mostly([[], ["# a comment line"]], [["unknown: 1"]]),
    )
    .map(([url, routes, ending, extra]) =>
      [
        "upstream:",
        `  url: ${url}`,
        ...extra,
        "routes:",
        ...routes.flatMap(([lines, auth, note], i) => [
          `  - path: /v1/items/${i}${note}`,
          ...lines,
          ...(auth === "" ? [] : [`    auth: ${auth}`]),
        ]),
        "",
      ].join(ending),
    );
  const seen = { accepted: 0, refused: 0 };
  await fc.assert(
    fc.asyncProperty(file, async (text) => {
      const check = await byCheck(text);
      seen[check.accepted ? "accepted" : "refused"]++;
      t.strictSame(await byLoad(text), check, JSON.stringify(text));
    }),
    { numRuns: 12, seed: 20261125 },
  );
  t.ok(seen.accepted > 0 && seen.refused > 0, `${seen.accepted} accepted, ${seen.refused} refused`);
});

/**
 * The memory store's state file is read and written so that no file can stop gatehouse or be
 * written through: a FIFO or a folder at its path is reported and the start goes on with empty
 * counters; a save goes to a new file of its own, flushed, then renamed over the path (a link at
 * the path is replaced, never followed); temporaries a killed save left behind are removed at
 * the next start.
 */
import { execFileSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const YAML = configFor(
  upstream.url,
  `plans:
  anonymous:
    rate_limit: { limit: 5, window: 1h }
routes:
  - path: /v1/**
    methods: [GET]
    auth: none
limits:
  state_file: state/counters.json
`,
);

t.test("a FIFO or a folder at state_file: reported, never waited on", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-state-safety-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const kind of ["FIFO", "folder"]) {
    const path = join(dir, kind);
    if (kind === "FIFO") execFileSync("mkfifo", [path]);
    else await mkdir(path);
    const again = await startTestGatehouse(YAML.replace("state/counters.json", path));
    const line = again.logs.find((l) => l.msg === "state file unreadable; counters start empty");
    t.match(line, { reason: /not a regular file/ }, `${kind}: the reason is named`);
    const res = await fetch(`${again.url}/v1/items`);
    t.equal(res.status, 200, `${kind}: and gatehouse serves`);
    await again.gatehouse.shutdown();
    await again.close();
  }
});

t.test("a save replaces a link at state_file, never writes through it", async (t) => {
  const gh = await startTestGatehouse(YAML, { files: { "state/.keep": "", "elsewhere.txt": "x" } });
  const path = join(gh.dir, "state", "counters.json");
  const target = join(gh.dir, "elsewhere.txt");
  await symlink(target, path);
  t.teardown(() => gh.close());
  await fetch(`${gh.url}/v1/items`);
  await gh.gatehouse.shutdown();
  t.equal(await readFile(target, "utf8"), "x", "the link's target is untouched");
  t.equal((await lstat(path)).isFile(), true, "the path is now the state file itself");
  t.equal((await stat(path)).mode & 0o777, 0o600, "readable by its owner only");
  const saved = JSON.parse(await readFile(path, "utf8")) as { version: number };
  t.equal(saved.version, 2);
  t.same(
    (await readdir(join(gh.dir, "state"))).sort(),
    [".keep", "counters.json"],
    "no temporary is left",
  );
});

t.test("temporaries left by a killed save are removed at the next start", async (t) => {
  const leftovers = {
    "state/counters.json.1234.tmp": "x".repeat(1024 * 1024),
    "state/counters.json.0f1e2d3c4b5a6978.tmp": "{",
  };
  const gh = await startTestGatehouse(YAML, {
    files: { ...leftovers, "state/other.tmp": "kept", "state/counters.json.bak": "kept" },
  });
  t.teardown(() => gh.close());
  const names = (await readdir(join(gh.dir, "state"))).sort();
  t.same(names, ["counters.json.bak", "other.tmp"], "only the state file's temporaries went");
  const line = gh.logs.find((l) => l.msg === "removed temporaries of an unfinished save");
  t.same(
    [...((line?.removed as string[] | undefined) ?? [])].sort(),
    Object.keys(leftovers)
      .map((name) => name.slice("state/".length))
      .sort(),
    "and says which",
  );
});

/**
 * The fast reading of plain YAML agrees with the full parser: on every YAML file in the
 * repository, on each scalar form of the core schema and its neighbours from YAML 1.1, and on
 * random documents. Where the two could differ, it declines and leaves the file to the full
 * parser, and such a file still loads.
 */
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import t from "tap";
import { parseDocument, stringify } from "yaml";
import { parseConfigText } from "../src/config/load.js";
import { readPlainYaml } from "../src/config/plain-yaml.js";

/** The full parser's value, with the options gatehouse reads its file with. */
function fullValue(text: string): unknown {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, strict: true });
  return doc.errors.length > 0 ? "refused" : doc.toJS({ maxAliasCount: 100 });
}

/** The fast reading declines `text`, or reads what the full parser reads. */
function agrees(text: string): { declined: boolean; same: boolean } {
  const plain = readPlainYaml(text);
  if (plain === undefined) return { declined: true, same: true };
  t.notSame(fullValue(text), "refused", "the full parser accepts what the fast reading accepts");
  return { declined: false, same: t.strictSame(plain.value, fullValue(text)) };
}

t.test("every YAML file in the repository reads the same both ways", async (t) => {
  const root = join(import.meta.dirname, "..");
  const files = execFileSync("git", ["ls-files", "*.yaml", "*.yml"], {
    cwd: root,
    encoding: "utf8",
  })
    .split("\n")
    .filter(Boolean);
  let read = 0;
  for (const file of files) {
    const text = await readFile(join(root, file), "utf8");
    const { declined, same } = agrees(text);
    if (!declined) read++;
    t.ok(same, file);
  }
  t.ok(read >= 10, `${read} of ${files.length} files were read the fast way`);
});

t.test("scalars resolve by the core schema, as the full parser resolves them", async (t) => {
  const scalars = [
    ...["0", "-0", "+12", "012", "0o17", "0o8", "0x1F", "0X1F", "0b11", "1_000", "1:30"],
    ...["1.", ".5", "-.5e3", "1e3", "1E-3", "1.5e", "+.inf", "-.Inf", ".NAN", ".nan", "inf"],
    ...["true", "True", "TRUE", "tRUE", "yes", "no", "on", "off", "y", "n"],
    ...["~", "null", "Null", "NULL", "nULL", "", "2026-11-25", "2026-11-25T10:00:00Z"],
    ...["'quoted 12'", '"\\x41\\u00e9"', "a # not a comment?", "a#b", "100%", "@x"],
  ];
  for (const scalar of scalars) {
    const text = `value: ${scalar}\nlist: [${scalar || "''"}, b]\n`;
    t.ok(agrees(text).same, JSON.stringify(scalar));
  }
});

t.test("what the two could read differently is declined", async (t) => {
  const declined = {
    "a directive": "%YAML 1.1\n---\nvalue: yes\n",
    "a tag": "value: !!str 12\n",
    "an anchor and an alias": "a: &x { b: 1 }\nc: *x\n",
    "an explicit key": "? a\n: b\n",
    "a null key": "~: a\n",
    "a key spelled null": "plans:\n  null: {}\n",
    "an empty key": "a:\n  : b\n",
    "a flow sequence as a key": "plans:\n  [standard]: {}\n",
    "a flow mapping as a key": "{ a: 1 }: b\n",
    "a repeated key": "a: 1\na: 2\n",
    "two documents": "a: 1\n---\na: 2\n",
    "a tab for indentation": "a:\n\tb: 1\n",
  };
  for (const [what, text] of Object.entries(declined)) {
    t.equal(readPlainYaml(text), undefined, what);
  }
});

t.test("a file the fast reading declines is read by the full parser", async (t) => {
  const text = `upstream: { url: "http://127.0.0.1:9" }
plans:
  default: &limits
    rate_limit: { limit: 10, window: 1m }
  anonymous: *limits
`;
  t.equal(readPlainYaml(text), undefined);
  const { file } = parseConfigText(text, "anchors.yaml");
  t.strictSame(file.plans.anonymous, file.plans.default);
});

t.test("random documents read the same both ways", async (t) => {
  const key = fc.oneof(
    fc.constantFrom("limit", "window", "path", "null", "~", "true", "1", "0x10", "a b", "é"),
    fc.string({ maxLength: 8 }),
  );
  const scalar = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.integer(),
    fc.double({ noNaN: true }),
    fc.boolean(),
    fc.constant(null),
    fc.constantFrom("yes", "0o7", "1_0", ".inf", "-.5", "2026-11-25", "a: b", "- x", "#c"),
  );
  const value = fc.letrec((tie) => ({
    node: fc.oneof({ depthSize: "small" }, scalar, tie("list"), tie("map")),
    list: fc.array(tie("node"), { maxLength: 4 }),
    map: fc.dictionary(key, tie("node"), { maxKeys: 4 }),
  })).map;
  let read = 0;
  fc.assert(
    fc.property(value, fc.boolean(), (document, flow) => {
      const text = stringify(document, { collectionStyle: flow ? "flow" : "block" });
      const { declined, same } = agrees(text);
      if (!declined) read++;
      return same;
    }),
    { numRuns: 300 },
  );
  t.ok(read >= 100, `${read} of 300 documents were read the fast way`);
});

t.test("a plain, valid file never loads the full parser; a file with a problem does", async (t) => {
  // In a process of its own: tap's reporter has the full parser loaded in this one.
  const load = new URL("../dist/src/config/load.js", import.meta.url).href;
  const probe = (text: string) =>
    execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { createRequire } from "node:module";
         const { parseConfigText } = await import(${JSON.stringify(load)});
         try { parseConfigText(${JSON.stringify(text)}, "probe.yaml"); } catch {}
         const cache = Object.keys(createRequire(import.meta.url).cache);
         process.stdout.write(String(cache.some((path) => path.includes("/node_modules/yaml/"))));`,
      ],
      { encoding: "utf8" },
    );
  const example = await readFile(join(import.meta.dirname, "..", "proxy.config.yaml"), "utf8");
  t.equal(probe(example), "false", "the example config");
  t.equal(probe(`${example}\nunknown_key: 1\n`), "true", "a file with an unknown key");
});

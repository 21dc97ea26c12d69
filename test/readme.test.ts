import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import t from "tap";
import { configJsonSchema } from "../src/config/json-schema.js";
import { ERROR_CODES } from "../src/http/error-codes.js";
import { readManual, section } from "./helpers/docs.js";

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  anyOf?: JsonSchema[];
}

/** Every leaf key of the config file: `routes[].path`, `plans.<name>.quota.limit`, ... */
function leafKeys(schema: JsonSchema, prefix: string): string[] {
  if (schema.anyOf) return schema.anyOf.flatMap((option) => leafKeys(option, prefix));
  if (schema.type === "object" && schema.properties) {
    return Object.entries(schema.properties).flatMap(([key, child]) =>
      leafKeys(child, prefix === "" ? key : `${prefix}.${key}`),
    );
  }
  if (schema.type === "object" && typeof schema.additionalProperties === "object") {
    return leafKeys(schema.additionalProperties, `${prefix}.<name>`);
  }
  if (schema.type === "array" && schema.items?.type === "object") {
    return leafKeys(schema.items, `${prefix}[]`);
  }
  return [prefix];
}

// The configuration reference (docs/configuration.md) is the user's manual for the file: it names
// every key the schema accepts, and no key the schema does not.
t.test("docs/configuration.md's reference lists exactly the schema's keys", async (t) => {
  const reference = section(readManual("docs/configuration.md"), "Configuration reference");
  t.ok(reference.length > 0, "the chapter has its Configuration reference");
  const documented = [...reference.matchAll(/^\| `([^`]+)`\s*\|/gm)].map((m) => m[1] as string);
  const keys = [...new Set(leafKeys(JSON.parse(configJsonSchema()) as JsonSchema, ""))];
  t.strictSame([...documented].sort(), [...keys].sort());
});

// Every error body's code is one of ERROR_CODES, which the type checker holds every answer to.
t.test("docs/errors.md's Errors table lists exactly the stable error codes", async (t) => {
  const errors = section(readManual("docs/errors.md"), "Errors");
  t.ok(errors.length > 0, "the chapter has its Errors section");
  const rows = [...errors.matchAll(/^\| (\d{3})\s*\| `([a-z_]+)`/gm)].map((m) => `${m[1]} ${m[2]}`);
  t.equal(new Set(rows).size, rows.length, "no row is listed twice");
  // A code may have a row per status (the DPoP codes: 400 at the token endpoint, 401 on routes).
  const documented = new Set(rows.map((row) => row.slice(4)));
  t.strictSame([...documented].sort(), [...ERROR_CODES].sort());
});

t.test("the README's two commands are the ones CI runs", async (t) => {
  const readme = await readFile("README.md", "utf8");
  t.match(readme, /```sh\nnpm ci && npm start\n```/);
  t.match(readme, /```sh\nnpm ci && npm test\n```/);
  const ci = await readFile(".ci/run", "utf8");
  t.match(ci, /^npm ci /m);
  t.match(ci, /^npm test$/m);
  // The second Node runs the tests alone, as the README says.
  t.match(readme, /`npm run test:unit -- --disable-coverage`/);
  t.match(ci, /^PATH=.+ npm run test:unit -- --disable-coverage$/m);
});

// The usage block is what a reader copies commands from: it shows every command the CLI has, as
// `gatehouse help` (run from the build, as a user would) prints it.
t.test("the README's usage block lists exactly the commands of gatehouse help", async (t) => {
  const readme = await readFile("README.md", "utf8");
  const block = /## Command line\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  const help = execFileSync(process.execPath, ["dist/src/cli.js", "help"], { encoding: "utf8" });
  // Each line is the usage and the summary, apart by two spaces or more (the alignment differs).
  const entries = (text: string) =>
    [...text.matchAll(/^ *(gatehouse .*?) {2,}(\S.*)$/gm)].map((m) => [m[1], m[2]]);
  t.ok(entries(help).length >= 8);
  t.strictSame(entries(block), entries(help));
});

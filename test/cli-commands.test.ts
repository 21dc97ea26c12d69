/** `gatehouse version` and `help`, and the usage errors, run as commands. */
import { spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import t from "tap";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";
const { version } = JSON.parse(await readFile("package.json", "utf8")) as { version: string };
const COMMANDS = [
  "run",
  "check",
  "token",
  "hash-secret",
  "keygen",
  "pubkey",
  "limits",
  "version",
  "help",
];

function gatehouse(args: string[], input = "", env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, GATEHOUSE_CONFIG: "", ...env },
  });
}

t.test("version and --version print package.json's version", async (t) => {
  for (const args of [["version"], ["--version"]]) {
    const result = gatehouse(args);
    t.equal(result.status, 0, args.join(" "));
    t.equal(result.stdout, `${version}\n`);
    t.equal(result.stderr, "");
  }
  t.equal(gatehouse(["version", "extra"]).status, 2);
  t.equal(gatehouse(["check", "--version"]).status, 2, "--version is not an option of check");
});

t.test("help and --help list every command with the exit codes", async (t) => {
  for (const args of [["help"], ["--help"], ["-h"]]) {
    const result = gatehouse(args);
    t.equal(result.status, 0, args.join(" "));
    for (const name of COMMANDS)
      t.match(result.stdout, new RegExp(`^  gatehouse \\[?${name}`, "m"));
    t.match(result.stdout, /Exit codes: 0 success, 1 failure, 2 usage error\./);
  }
});

t.test("help COMMAND and COMMAND --help print that command's help", async (t) => {
  for (const name of COMMANDS) {
    const viaHelp = gatehouse(["help", name]);
    t.equal(viaHelp.status, 0, `help ${name}`);
    t.match(viaHelp.stdout, new RegExp(`^usage: gatehouse \\[?${name}`));
  }
  for (const name of ["check", "pubkey"]) {
    const viaOption = gatehouse([name, "--help"]);
    t.equal(viaOption.status, 0, `${name} --help`);
    t.equal(viaOption.stdout, gatehouse(["help", name]).stdout);
  }
  t.match(gatehouse(["help", "check"]).stdout, /\$GATEHOUSE_CONFIG/);
  const unknown = gatehouse(["help", "nope"]);
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /no command "nope"/);
});

t.test("usage errors exit 2 and say what was wrong", async (t) => {
  for (const [args, message] of [
    [["frobnicate"], /unknown command "frobnicate"/],
    [
      ["--bogus"],
      /^gatehouse: unknown option --bogus; gatehouse help lists every command and its options\nusage:\n/,
    ],
    [["-v"], /^gatehouse: unknown option -v; gatehouse help lists every command and its options\n/],
    [["--json=yes", "limits"], /^gatehouse: --json takes no value\n/],
    [["check", "--json"], /^gatehouse: --json is an option of token and limits, not of check\n/],
    [
      ["--config", "--json"],
      /--config needs a value \(for one that starts with -, write --config=--json\)/,
    ],
    [
      ["keygen", "--config", "x.yaml"],
      /--config is an option of run, check, token and limits, not of keygen/,
    ],
    [["check", "--alg", "ES256"], /--alg is an option of keygen, not of check/],
    [["pubkey", "a.pem", "b.pem"], /unexpected argument "b\.pem": gatehouse pubkey \[FILE\]/],
    [["check", "extra"], /unexpected argument "extra"/],
    [["--config"], /^gatehouse: --config needs a value\n/],
  ] as const) {
    const result = gatehouse([...args]);
    t.equal(result.status, 2, args.join(" "));
    t.match(result.stderr, message);
    t.equal(result.stdout, "");
  }
});

import { spawnSync } from "node:child_process";
import t from "tap";

// `gatehouse check` reports every problem of a file in one run, in line order, whatever else is
// wrong: the checks that relate sections (a client's plan, overlapping routes, unservable routes,
// the state file beside Redis) read whatever parts of the file are well-formed, so a problem in
// one part never hides a problem in another. Run through the built command.
const CLI = "dist/src/cli.js";
const DIR = "test/fixtures/check";

function check(file: string) {
  return spawnSync(process.execPath, [CLI, "check", "--config", file], {
    encoding: "utf8",
    env: { ...process.env, GATEHOUSE_CONFIG: "", APP_SECRET: "s" },
  });
}

const cases: Record<string, string[]> = {
  // An unknown key and an invalid plan used to hide the client that names no plan.
  "schema-and-references.yaml": [
    '3:3 upstream.timout: unknown key; did you mean "timeout"? (allowed here: url, timeout, max_sockets, idle_timeout, server_name, identity_header, issuer_header, scopes_header, forward_authorization, websocket, underscore_headers)',
    "7:11 clients[0].plan: names no plan; known plans: standard",
    "10:26 plans.standard.rate_limit.limit: must be at least 1",
  ],
  // A bad method used to hide the route whose methods overlap another's, and a bad reset_header the state file; the
  // unknown keys inside the plans do not stop their well-formed limits from being judged.
  "bad-routes-beside-bad-plans.yaml": [
    "11:44 plans.standard.rate_limits.sustained.jitter: unknown key (allowed here: limit, window)",
    "13:37 plans.anonymous.quota.burst: unknown key (allowed here: limit, period)",
    "16:20 routes[0].methods[1]: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
    '17:11 routes[0].cost: is 2, above client "reporting-app"\'s rate limit "burst" (1 per 1s): its requests to this route can never be served',
    "19:14 routes[1].methods: GET is also in routes[0] of the same path; list each of a path's methods in one entry only",
    "23:11 routes[2].cost: is 3, above the anonymous plan's quota (2 per day): its requests to this route can never be served",
    "26:15 limits.state_file: is for the memory store; Redis keeps its own counters",
    "27:17 limits.reset_header: must be seconds or unix",
  ],
};

for (const [name, lines] of Object.entries(cases)) {
  t.test(`check reports every problem of ${name}, in line order`, async (t) => {
    const file = `${DIR}/${name}`;
    const result = check(file);
    t.equal(result.status, 1);
    t.equal(result.stdout, "");
    t.equal(result.stderr, lines.map((line) => `${file}:${line}\n`).join(""));
  });
}

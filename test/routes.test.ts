import fc from "fast-check";
import t from "tap";
import type { RouteConfig } from "../src/config/schema.js";
import { compileRoutes } from "../src/routes/table.js";

const table = compileRoutes([
  {
    path: "/v1/items",
    methods: ["GET"],
    cost: 1,
    auth: "bearer",
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  },
  {
    path: "/v1/items/*",
    methods: ["GET", "PUT", "DELETE"],
    cost: 2,
    auth: "bearer",
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  },
  {
    path: "/v1/reports/**",
    methods: ["GET", "POST"],
    cost: 1,
    auth: "bearer",
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  },
  {
    path: "/v1/caf%c3%a9/%7Ex",
    methods: ["GET"],
    cost: 1,
    auth: "none",
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  },
  {
    path: "/v1/items",
    methods: ["POST"],
    cost: 1,
    auth: "none",
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  },
]);

const cases: Array<[string, string, string]> = [
  ["GET", "/v1/items", "/v1/items"],
  ["POST", "/v1/items", "/v1/items"],
  ["GET", "/v1/items/42", "/v1/items/*"],
  ["DELETE", "/v1/items/42", "/v1/items/*"],
  ["GET", "/v1/items/", "not_found"],
  ["GET", "/v1/items/a/b", "not_found"],
  ["GET", "/v1/reports", "/v1/reports/**"],
  ["POST", "/v1/reports/2026/11", "/v1/reports/**"],
  ["GET", "/v1/reportsx", "not_found"],
  ["GET", "/V1/items", "not_found"],
  ["GET", "/v1/caf%C3%A9/~x", "/v1/caf%c3%a9/%7Ex"],
  ["PATCH", "/v1/items/42", "method_not_allowed"],
  ["PUT", "/v1/items", "method_not_allowed"],
];
for (const [method, path, expected] of cases) {
  const match = table.match(method, path);
  const got = match.kind === "route" ? match.route.pattern : match.kind;
  t.equal(got, expected, `${method} ${path}`);
}

const notAllowed = table.match("PUT", "/v1/items");
t.strictSame(
  notAllowed,
  { kind: "method_not_allowed", allow: "GET, POST" },
  "Allow lists every matching route's methods",
);

t.test("a literal route behind a wildcard that matches it is not taken first", async (t) => {
  const shadowed = compileRoutes([
    {
      path: "/v1/*",
      methods: ["GET"],
      cost: 3,
      auth: "none",
      dpop: "optional",
      websocket: false,
      token_from: ["header"],
    },
    {
      path: "/v1/items",
      methods: ["GET", "POST"],
      cost: 1,
      auth: "none",
      dpop: "optional",
      websocket: false,
      token_from: ["header"],
    },
    {
      path: "/v1/items",
      methods: ["PUT"],
      cost: 1,
      auth: "none",
      dpop: "optional",
      websocket: false,
      token_from: ["header"],
    },
  ]);
  const pattern = (method: string, path: string) => {
    const match = shadowed.match(method, path);
    return match.kind === "route" ? match.route.pattern : match.kind;
  };
  t.equal(pattern("GET", "/v1/items"), "/v1/*", "the first match wins");
  t.equal(pattern("POST", "/v1/items"), "/v1/items");
  t.equal(pattern("PUT", "/v1/items"), "/v1/items");
  t.strictSame(shadowed.match("DELETE", "/v1/items"), {
    kind: "method_not_allowed",
    allow: "GET, POST, PUT",
  });
});

t.test("entries of one path: each method finds its own entry, others are 405", async (t) => {
  const entry = (
    path: string,
    methods: RouteConfig["methods"],
    auth: RouteConfig["auth"],
  ): RouteConfig => ({
    path,
    methods,
    cost: 1,
    auth,
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
  });
  const shared = compileRoutes([
    entry("/v1/items", ["GET"], "none"),
    entry("/v1/items/*", ["GET"], "none"),
    entry("/v1/items", ["POST", "PUT"], "bearer"),
    entry("/v1/items/*", ["DELETE"], "bearer"),
    entry("/v1/items", ["DELETE"], "none"),
  ]);
  const routes = shared.routes;
  const entryOf = (method: string, path: string) => {
    const match = shared.match(method, path);
    return match.kind === "route" ? routes.indexOf(match.route) : match;
  };
  t.equal(entryOf("GET", "/v1/items"), 0);
  t.equal(entryOf("POST", "/v1/items"), 2, "the second entry of a literal path");
  t.equal(entryOf("PUT", "/v1/items"), 2);
  t.equal(entryOf("DELETE", "/v1/items"), 4, "the third");
  t.equal(entryOf("GET", "/v1/items/7"), 1);
  t.equal(entryOf("DELETE", "/v1/items/7"), 3, "the second entry of a wildcard path");
  t.strictSame(entryOf("PATCH", "/v1/items"), {
    kind: "method_not_allowed",
    allow: "GET, POST, PUT, DELETE",
  });
  // HEAD is a method of its own: an entry allowing GET does not allow it.
  t.strictSame(entryOf("HEAD", "/v1/items/7"), {
    kind: "method_not_allowed",
    allow: "GET, DELETE",
  });
});

t.test("any table answers as a scan of its routes in order would", async (t) => {
  // The table indexes literal paths; whatever the mix of literal and wildcard routes, its
  // answers are those of testing every route in order.
  const segment = fc.constantFrom("a", "b", "%7Ec", "~c", "*", "**");
  const pattern = fc
    .array(segment, { minLength: 1, maxLength: 3 })
    .filter((s) => !s.slice(0, -1).includes("**"))
    .map((s) => "/" + s.join("/"));
  const route = fc.record({
    path: pattern,
    methods: fc.subarray(["GET", "POST"] as const, { minLength: 1 }),
  });
  const request = fc.tuple(
    fc.constantFrom("GET", "POST"),
    fc.array(fc.constantFrom("a", "b", "~c", "d", ""), { minLength: 1, maxLength: 4 }),
  );
  fc.assert(
    fc.property(fc.array(route, { maxLength: 8 }), request, (entries, [method, segments]) => {
      const table = compileRoutes(
        entries.map((e) => ({
          ...e,
          methods: [...e.methods],
          cost: 1,
          auth: "none",
          dpop: "optional",
          websocket: false,
          token_from: ["header"],
        })),
      );
      const path = "/" + segments.join("/");
      const matching = table.routes.filter((r) => r.matcher.test(path));
      const first = matching.find((r) => r.methods.has(method));
      const got = table.match(method, path);
      if (first !== undefined) return got.kind === "route" && got.route === first;
      return got.kind === (matching.length > 0 ? "method_not_allowed" : "not_found");
    }),
    { numRuns: 2000 },
  );
  t.pass("every table agreed with the scan");
});

import t from "tap";
import { compileRoutes } from "../src/routes/table.js";

const table = compileRoutes([
  { path: "/v1/items", methods: ["GET"], cost: 1, auth: "bearer" },
  { path: "/v1/items/*", methods: ["GET", "PUT", "DELETE"], cost: 2, auth: "bearer" },
  { path: "/v1/reports/**", methods: ["GET", "POST"], cost: 1, auth: "bearer" },
  { path: "/v1/caf%c3%a9/%7Ex", methods: ["GET"], cost: 1, auth: "none" },
  { path: "/v1/items", methods: ["POST"], cost: 1, auth: "none" },
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
    { path: "/v1/*", methods: ["GET"], cost: 3, auth: "none" },
    { path: "/v1/items", methods: ["GET", "POST"], cost: 1, auth: "none" },
    { path: "/v1/items", methods: ["PUT"], cost: 1, auth: "none" },
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

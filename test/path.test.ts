import t from "tap";
import { canonicalTarget } from "../src/http/path.js";

const accepted: Array<[string, string, string | null]> = [
  ["/v1/items", "/v1/items", null],
  ["/v1/items?a=1&b=%27", "/v1/items", "a=1&b=%27"],
  ["/v1/items?", "/v1/items", ""],
  ["/v1/%7Eitems", "/v1/~items", null],
  ["/v1/%61bc", "/v1/abc", null],
  ["/v1/caf%c3%a9", "/v1/caf%C3%A9", null],
  ["/v1/items/", "/v1/items/", null],
  ["/", "/", null],
  ["http://evil.example/v1/items?x", "/v1/items", "x"],
  ["HTTP://evil.example", "/", null],
  ["/v1/a..b/.c", "/v1/a..b/.c", null],
  ["/v1/x;jsessionid=1", "/v1/x;jsessionid=1", null],
];
for (const [target, path, query] of accepted) {
  t.strictSame(canonicalTarget(target), { path, query }, `accepts ${target}`);
}

const rejected: Array<[string, string]> = [
  ["*", "not_origin_form"],
  ["example.com:443", "not_origin_form"],
  ["/admin#x", "fragment"],
  ["/api/./v1", "dot_segment"],
  ["/api/../admin", "dot_segment"],
  ["/api/%2e%2e/admin", "dot_segment"],
  ["/api/%2E%2e/admin", "dot_segment"],
  ["/api/.%2e/admin", "dot_segment"],
  ["/api/..;/admin", "dot_segment"],
  ["/api/..", "dot_segment"],
  ["/api/.", "dot_segment"],
  ["//admin", "empty_segment"],
  ["//evil.example/admin", "empty_segment"],
  ["/api//v1", "empty_segment"],
  ["/api/..%2fadmin", "encoded_slash"],
  ["/api/v1/%2fx", "encoded_slash"],
  ["/api/v1/%2Fx", "encoded_slash"],
  ["/api/%5cadmin", "encoded_slash"],
  ["/api\\..\\admin", "backslash"],
  ["/api/%00", "control_character"],
  ["/api/%0A", "control_character"],
  ["/api/%1f", "control_character"],
  ["/api/%7F", "control_character"],
  ["/api/%zz", "bad_percent_encoding"],
  ["/api/%4", "bad_percent_encoding"],
  ['/api/"x"', "invalid_character"],
  ["/api/<x>", "invalid_character"],
  ["/api/caf\u00e9", "invalid_character"],
];
for (const [target, reason] of rejected) {
  t.equal(canonicalTarget(target), reason, `rejects ${JSON.stringify(target)} as ${reason}`);
}

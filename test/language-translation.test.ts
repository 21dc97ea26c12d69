import fc from "fast-check";
import t from "tap";
import { compileLanguages } from "../src/language/table.js";
import { canonicaliseTranslation } from "../src/language/translation.js";
import { CANONICAL, REFUSED } from "./helpers/translation-cases.js";

function rules(
  overrides: Partial<{
    max: number;
    on_unsupported: "reject" | "drop";
    forward_as: "comma" | "repeat";
  }> = {},
) {
  return compileLanguages({
    supported: ["en", "fr", "de", "es", "it"],
    default: "en",
    translation: {
      parameter: "translation_language",
      max: 5,
      on_unsupported: "reject",
      forward_as: "comma",
      ...overrides,
    },
  }).translation;
}

const comma = rules();

t.test("canonical forms (forward_as: comma)", async (t) => {
  for (const [query, expected, why] of CANONICAL) {
    const decision = canonicaliseTranslation(query, comma);
    t.not(decision.kind, "refused", `${why}: decided`);
    // Absent: there is nothing to canonicalise, and the query goes as it came.
    const forwarded = decision.kind === "canonical" ? decision.query : query;
    t.equal(forwarded, expected, `${why}: ${query}`);
  }
});

t.test("the cap keeps the first codes, counted after de-duplication", async (t) => {
  const two = rules({ max: 2 });
  const decision = canonicaliseTranslation("translation_language=it,IT,fr,de", two);
  t.same(decision, { kind: "canonical", query: "translation_language=it,fr", codes: ["it", "fr"] });
});

t.test("forward_as: repeat", async (t) => {
  const repeat = rules({ forward_as: "repeat" });
  const cases: Array<[string, string | null]> = [
    ["translation_language=FR,de", "translation_language=fr&translation_language=de"],
    [
      "a=1&translation_language=fr,de&b=2",
      "a=1&translation_language=fr&translation_language=de&b=2",
    ],
    [
      "translation_language=fr&x=1&translation_language=de",
      "translation_language=fr&translation_language=de&x=1",
    ],
    ["translation_language=", null],
  ];
  for (const [query, expected] of cases) {
    const decision = canonicaliseTranslation(query, repeat);
    t.equal(decision.kind === "canonical" ? decision.query : decision.kind, expected, query);
  }
});

t.test("absent: the query is left alone", async (t) => {
  for (const query of [
    null,
    "",
    "a=1",
    "a=%20",
    "translation=fr",
    "xtranslation_language=fr",
    "translation_language%C3%A9=xx",
  ]) {
    t.equal(canonicaliseTranslation(query, comma).kind, "absent", String(query));
  }
});

t.test("refused forms (on_unsupported: reject)", async (t) => {
  for (const [query, message, why] of REFUSED) {
    t.same(canonicaliseTranslation(query, comma), { kind: "refused", message }, why);
  }
});

t.test("on_unsupported: drop", async (t) => {
  const drop = rules({ on_unsupported: "drop" });
  const cases: Array<[string, string | null]> = [
    ["translation_language=xx,fr,yy-ZZ,de", "translation_language=fr,de"],
    ["a=1&translation_language=xx", "a=1"],
    ["translation_language=xx", null],
  ];
  for (const [query, expected] of cases) {
    const decision = canonicaliseTranslation(query, drop);
    t.equal(decision.kind === "canonical" ? decision.query : decision.kind, expected, query);
  }
  t.equal(
    canonicaliseTranslation("translation_language=fr%0A", drop).kind,
    "refused",
    "a value that is no language code is refused even with drop",
  );
  t.equal(
    canonicaliseTranslation("translation_language[0]=xx", drop).kind,
    "refused",
    "bracketed forms are refused even with drop",
  );
});

t.test("another parameter name", async (t) => {
  const other = compileLanguages({
    supported: ["en", "fr"],
    default: "en",
    translation: { parameter: "lang.t", max: 1, on_unsupported: "reject", forward_as: "comma" },
  }).translation;
  const decision = canonicaliseTranslation("translation_language=xx&lang.t=FR,en", other);
  t.same(decision, {
    kind: "canonical",
    query: "translation_language=xx&lang.t=fr",
    codes: ["fr"],
  });
});

// The usual query (the parameter once, nothing percent-encoded) is rewritten in place; any
// percent-encoded pair sends a query through the general path, which splits it into pairs. A
// pair that decodes to nothing of interest appended to a query must change nothing else.
t.test("the in-place rewrite and the general path agree", async (t) => {
  const piece = fc.constantFrom(
    "translation_language",
    "translation_languages",
    "translation_language[]",
    "=",
    "&",
    ",",
    " ",
    "+",
    "fr",
    "DE",
    "de-AT",
    "xx",
    "en_GB",
    "a=1",
    "x",
    "1",
  );
  const query = fc.array(piece, { maxLength: 12 }).map((pieces) => pieces.join(""));
  const marker = "%7A=1";
  for (const table of [comma, rules({ forward_as: "repeat", on_unsupported: "drop", max: 2 })]) {
    fc.assert(
      fc.property(query, (q) => {
        const plain = canonicaliseTranslation(q, table);
        const general = canonicaliseTranslation(`${q}&${marker}`, table);
        if (plain.kind !== "canonical" || general.kind !== "canonical") {
          return JSON.stringify(plain) === JSON.stringify(general);
        }
        const expected = plain.query === null ? marker : `${plain.query}&${marker}`;
        return (
          general.query === expected &&
          JSON.stringify(general.codes) === JSON.stringify(plain.codes)
        );
      }),
      { numRuns: 2000 },
    );
  }
  t.pass("2000 queries for each of two rule sets");
});

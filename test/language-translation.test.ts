import fc from "fast-check";
import t from "tap";
import { compileLanguages } from "../src/language/table.js";
import { canonicaliseTranslation } from "../src/language/translation.js";

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

// [query as received, the query the upstream receives]
const canonical: Array<[string, string | null, string]> = [
  ["translation_language=fr,de", "translation_language=fr,de", "already canonical"],
  ["translation_language=FR,%20De", "translation_language=fr,de", "case and whitespace"],
  ["translation_language=FR,+De+", "translation_language=fr,de", "+ decoded as a space"],
  ["translation_language=fr,fr,fr,fr,fr,fr", "translation_language=fr", "duplicates"],
  ["translation_language=fr&translation_language=de", "translation_language=fr,de", "repeated"],
  [
    "a=1&translation_language=fr&b=2&translation_language=de,fr&c=3",
    "a=1&translation_language=fr,de&b=2&c=3",
    "merged where the parameter first appeared, the rest in order",
  ],
  ["translation_language=fr%2Cde", "translation_language=fr,de", "encoded comma decoded once"],
  ["translation_language=fr%2cde", "translation_language=fr,de", "lower-case escape"],
  ["translation_language=", null, "empty value removed"],
  ["translation_language", null, "bare key removed"],
  ["a=1&translation_language=&b=2", "a=1&b=2", "empty value removed between others"],
  ["translation_language=fr,,de", "translation_language=fr,de", "empty members skipped"],
  ["translation_language=,", null, "only empty members"],
  [
    "translation_language=en,fr,de,es,it,en-x",
    "translation_language=en,fr,de,es,it",
    "only the first five kept",
  ],
  ["translation_language=de-AT", "translation_language=de", "region reduced"],
  ["translation_language=en-US,en-GB,en", "translation_language=en", "regions reduce then dedupe"],
  ["translation_language=de_AT", "translation_language=de", "underscore read as hyphen"],
  ["translation%5Flanguage=fr", "translation_language=fr", "encoded parameter name"],
  [
    "q=%E2%9C%93&translation_language=it&x=a%2Cb+c",
    "q=%E2%9C%93&translation_language=it&x=a%2Cb+c",
    "other parameters byte for byte",
  ],
  ["a=1&&translation_language=es&", "a=1&&translation_language=es&", "empty pairs kept"],
  [
    "Translation_Language=xx&translation_language=fr",
    "Translation_Language=xx&translation_language=fr",
    "names are case-sensitive: another parameter",
  ],
  [
    "translation_languages=xx&translation_language=fr",
    "translation_languages=xx&translation_language=fr",
    "a longer name is another parameter",
  ],
  ["a=1&translation_language&b=2", "a=1&b=2", "a bare key between others removed"],
  ["&translation_language=", "", "an empty pair before the removed one kept"],
  [
    "x=translation_language&translation_language=DE",
    "x=translation_language&translation_language=de",
    "the name inside another value is not the parameter",
  ],
  ["q=a+b&translation_language=FR", "q=a+b&translation_language=fr", "a + elsewhere kept"],
  ["translation_language=fr+,de", "translation_language=fr,de", "a + in the value is a space"],
];

t.test("canonical forms (forward_as: comma)", async (t) => {
  for (const [query, expected, why] of canonical) {
    const decision = canonicaliseTranslation(query, comma);
    t.equal(decision.kind, "canonical", `${why}: decided`);
    if (decision.kind === "canonical") t.equal(decision.query, expected, `${why}: ${query}`);
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

// [query, the message of the 400]
const refusedCases: Array<[string, string, string]> = [
  [
    "translation_language=xx",
    'translation_language: "xx" is not a supported language (supported: en, fr, de, es, it)',
    "unsupported code named",
  ],
  [
    "translation_language=fr,XX-yy",
    'translation_language: "XX-yy" is not a supported language (supported: en, fr, de, es, it)',
    "unsupported after a supported one",
  ],
  [
    "translation_language=fr%252Cde",
    'translation_language: "fr%2Cde" is not a language code',
    "double-encoded comma decoded once",
  ],
  [
    "translation_language[]=fr",
    "translation_language[] and translation_language[N] are not accepted; send translation_language=fr,de",
    "empty brackets",
  ],
  [
    "a=1&translation_language[0]=fr",
    "translation_language[] and translation_language[N] are not accepted; send translation_language=fr,de",
    "indexed brackets",
  ],
  [
    "translation_language%5B%5D=fr",
    "translation_language[] and translation_language[N] are not accepted; send translation_language=fr,de",
    "encoded brackets",
  ],
  [
    "translation_language=fr%0d%0a",
    'translation_language: "fr\\r\\n" is not a language code',
    "encoded CR LF",
  ],
  [
    "translation_language=%00",
    'translation_language: "\\u0000" is not a language code',
    "encoded NUL",
  ],
  [
    "translation_language=fr%zz",
    "translation_language has a malformed percent-encoding",
    "bad percent-encoding",
  ],
  [
    "translation_language=%E9",
    "translation_language has a malformed percent-encoding",
    "invalid UTF-8",
  ],
  [
    `translation_language=${"a".repeat(50)}`,
    `translation_language: "${"a".repeat(35)}..." is not a language code`,
    "a long value is shortened in the message",
  ],
];

t.test("refused forms (on_unsupported: reject)", async (t) => {
  for (const [query, message, why] of refusedCases) {
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

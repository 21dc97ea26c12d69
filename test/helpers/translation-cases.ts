/**
 * The translation parameter's cases, shared by the unit tests of its canonicaliser and the tests
 * through real sockets, under the default languages: en, fr, de, es, it; at most 5 codes;
 * unsupported codes refused; forwarded as one comma-separated value.
 */

/** [query as received, the query the upstream receives (null: none at all), why] */
export const CANONICAL: ReadonlyArray<readonly [string, string | null, string]> = [
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
  [
    "a=%41&translation_language=fr&b=x+y&translation_language=de-AT,FR",
    "a=%41&translation_language=fr,de&b=x+y",
    "merged in place, the rest byte for byte",
  ],
  ["translation_language=%20Fr%20,%20De", "translation_language=fr,de", "encoded spaces"],
  [
    "translation_language=it,es,de,fr,en,fr-CA,de-CH",
    "translation_language=it,es,de,fr,en",
    "only the first five kept",
  ],
  ["q=caf%C3%A9&sort=-date", "q=caf%C3%A9&sort=-date", "no parameter: untouched"],
];

/** [query as received, the message of the 400, why] */
export const REFUSED: ReadonlyArray<readonly [string, string, string]> = [
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

/** The target the upstream receives for `path` and the query it is forwarded with (an empty one is sent without its "?"). */
export function forwardedTarget(path: string, query: string | null): string {
  return query ? `${path}?${query}` : path;
}

/**
 * A fast reading of plain YAML: block and flow collections of scalars, which is what a config file
 * is. The full parser (`yaml`, which keeps every node's position for error messages) costs about
 * ten times as much per byte, and a file of 10,000 routes is most of a second of it; js-yaml builds
 * the same values directly. Both implement YAML 1.2, and the scalars here resolve by the core
 * schema's own patterns, as the full parser's do. A document that uses anything where the two
 * could read a file differently (directives, tags, anchors and aliases, explicit, null or
 * collection keys) is declined, as is one js-yaml refuses: the full parser reads those.
 */
import jsyaml from "js-yaml";

/**
 * A scalar type of the YAML 1.2 core schema: each form's pattern, tried in order, and how a text
 * of that form is read. (js-yaml keeps one type per tag, so the forms of a tag are one type.)
 */
function coreScalar(
  tag: string,
  forms: ReadonlyArray<readonly [RegExp, (text: string) => unknown]>,
) {
  const formOf = (text: string) => forms.find(([pattern]) => pattern.test(text));
  return new jsyaml.Type(`tag:yaml.org,2002:${tag}`, {
    kind: "scalar",
    resolve: (text: string | null) => text !== null && formOf(text) !== undefined,
    construct: (text: string) => formOf(text)?.[1](text),
  });
}

const CORE_SCHEMA = jsyaml.FAILSAFE_SCHEMA.extend({
  implicit: [
    coreScalar("null", [[/^(?:~|[Nn]ull|NULL)?$/, () => null]]),
    coreScalar("bool", [[/^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/, (text) => /^[Tt]/.test(text)]]),
    coreScalar("int", [
      [/^0o[0-7]+$/, (text) => parseInt(text.slice(2), 8)],
      [/^[-+]?[0-9]+$/, Number],
      [/^0x[0-9a-fA-F]+$/, (text) => parseInt(text.slice(2), 16)],
    ]),
    coreScalar("float", [
      [/^[-+]?\.(?:inf|Inf|INF)$/, (text) => (text.startsWith("-") ? -Infinity : Infinity)],
      [/^\.(?:nan|NaN|NAN)$/, () => NaN],
      [/^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/, parseFloat],
      [/^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/, parseFloat],
    ]),
  ],
});

/**
 * What this reading leaves to the full parser, found in the text (a match in a comment or a
 * quoted string only costs the faster reading):
 * - a directive (`%YAML 1.1` changes what scalars mean);
 * - at the start of a node, a tag (`!`), an anchor (`&`), an alias (`*`) or an explicit key (`?`);
 * - a key that is empty or null (`~:`), which the two turn into different strings;
 * - a flow collection used as a key (`[a]: b`).
 */
const NOT_PLAIN =
  /^%|(?:^|[\s,[{])(?:[!&*]|\?(?=\s|$)|(?:~|[Nn]ull|NULL)?[ \t]*:(?=\s|$|[,\]}]))|[\]}][ \t]*:(?=\s|$)/m;

/**
 * The value of a plain YAML document: `{ value }`, or undefined when the text is not plain (see
 * above) or js-yaml refuses it, for the full parser to read and to report on.
 */
export function readPlainYaml(text: string): { value: unknown } | undefined {
  if (NOT_PLAIN.test(text)) return undefined;
  try {
    return { value: jsyaml.load(text, { schema: CORE_SCHEMA }) };
  } catch {
    return undefined;
  }
}

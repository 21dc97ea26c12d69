/** Durations in the config file: a whole number and a unit, like `500ms`, `30s`, `1m`, `1h`, `1d`. */

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** Matches any duration, zero included. */
export const DURATION_PATTERN = "^(0|[1-9][0-9]{0,9})(ms|s|m|h|d)$";
/** Matches a duration greater than zero. */
export const POSITIVE_DURATION_PATTERN = "^[1-9][0-9]{0,9}(ms|s|m|h|d)$";

const DURATION = new RegExp(DURATION_PATTERN);

/** Milliseconds in a duration string already validated by the schema. */
export function durationMs(text: string): number {
  const match = DURATION.exec(text);
  if (match === null) throw new RangeError(`not a duration: ${JSON.stringify(text)}`);
  return Number(match[1]) * (UNIT_MS[match[2] as string] as number);
}

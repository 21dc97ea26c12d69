/** Key paths in the configuration file, as problems name them. */

/** A key path as written in messages: `routes[0].path`. */
export function where(path: readonly PropertyKey[]): string {
  if (path.length === 0) return "(top level)";
  return path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join("");
}

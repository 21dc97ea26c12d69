/** The published JSON Schema of the config file, generated from the one zod schema. */
import { z } from "zod";
import { FileSchema } from "./schema.js";

/** The config file's JSON Schema: every key the file may hold, in the schema's order. */
export function fileJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(FileSchema, { io: "input", unrepresentable: "any" });
}

/** The JSON Schema text written to `config.schema.json` (stable key order, trailing newline). */
export function configJsonSchema(): string {
  return `${JSON.stringify(
    {
      ...fileJsonSchema(),
      title: "gatehouse configuration",
      description: "proxy.config.yaml: see docs/configuration.md, the configuration reference.",
    },
    null,
    2,
  )}\n`;
}

/** The published JSON Schema of the config file, generated from the one zod schema. */
import { z } from "zod";
import { FileSchema } from "./schema.js";

/** The JSON Schema text written to `config.schema.json` (stable key order, trailing newline). */
export function configJsonSchema(): string {
  const schema = z.toJSONSchema(FileSchema, { io: "input", unrepresentable: "any" });
  return `${JSON.stringify(
    {
      ...schema,
      title: "gatehouse configuration",
      description: "proxy.config.yaml: see docs/configuration.md, the configuration reference.",
    },
    null,
    2,
  )}\n`;
}

/** Writes config.schema.json at the repository root (`npm run schema`). */
import { writeFileSync } from "node:fs";
import { configJsonSchema } from "./json-schema.js";

writeFileSync(new URL("../../../config.schema.json", import.meta.url), configJsonSchema());

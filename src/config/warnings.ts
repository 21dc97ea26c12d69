/**
 * What a valid configuration may still get wrong: settings that work for one process but not for
 * the fleet they are written for. `check` prints these and the start logs them; neither refuses.
 */
import type { FileConfig } from "./schema.js";

/** One warning about a valid file, at the key to change. */
export interface ConfigWarning {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** The warnings that `file` deserves. */
export function configWarnings(file: FileConfig): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  const { signing } = file.tokens;
  if (
    file.limits.store === "redis" &&
    signing.key_file === undefined &&
    signing.secret_env === undefined
  ) {
    // Replicas sharing a Redis are a fleet; with a generated key each signs with its own.
    warnings.push({
      path: ["limits", "store"],
      message:
        "is redis but tokens.signing has neither key_file nor secret_env: each replica signs with a key of its own, so replicas will not accept each other's tokens (give them one key: gatehouse keygen --out keys/signing.pem)",
    });
  }
  return warnings;
}

/**
 * The configuration in force as `GET /config` shows it: the file with its defaults, less what
 * could let a reader in. Variable names (`secret_env`) and file paths (`key_file`) stay, since
 * they tell an operator where a secret comes from without telling the secret.
 */
import type { FileConfig } from "../config/schema.js";

// Keys whose value is a credential or a credential's hash, at any depth.
const CREDENTIAL_KEYS = new Set(["secret_hash", "secret", "password", "token"]);

// A URL's password (redis://:PASSWORD@host) is left out; the rest of the URL is shown.
function withoutPassword(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(value)) return value;
  try {
    const url = new URL(value);
    if (url.password === "") return value;
    url.password = "";
    return url.href;
  } catch {
    return value;
  }
}

function redact(value: unknown): unknown {
  if (typeof value === "string") return withoutPassword(value);
  if (Array.isArray(value)) return value.map(redact);
  if (value !== null && typeof value === "object") {
    const shown: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      if (!CREDENTIAL_KEYS.has(key)) shown[key] = redact(child);
    }
    return shown;
  }
  return value;
}

/** `file` without credentials: what `GET /config` answers. */
export function publicConfig(file: FileConfig): unknown {
  return redact(file);
}

/**
 * What a valid configuration may still get wrong: settings that work for one process but not for
 * the fleet they are written for, and client secrets too short to stand against guessing. `check`
 * prints these and the start logs them; neither refuses.
 */
import type { FileConfig } from "./schema.js";

/** One warning about a valid file, at the key to change. */
export interface ConfigWarning {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** Characters below which a client secret is guessable by someone who can try many addresses. */
const MIN_CLIENT_SECRET_CHARS = 32;

/** The warnings that `file` deserves, its `secret_env` variables read from `env`. */
export function configWarnings(file: FileConfig, env: NodeJS.ProcessEnv): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  for (const [index, client] of file.clients.entries()) {
    const secret = client.secret_env === undefined ? undefined : env[client.secret_env];
    // An unset variable is an error reported elsewhere; failures are limited per address only, so
    // the secret's length is what stands against guesses spread over many addresses.
    if (secret === undefined || secret === "" || secret.length >= MIN_CLIENT_SECRET_CHARS) continue;
    warnings.push({
      path: ["clients", index, "secret_env"],
      message: `names ${client.secret_env}, which holds ${secret.length} character${secret.length === 1 ? "" : "s"}; a client secret should be random and at least ${MIN_CLIENT_SECRET_CHARS} characters long (openssl rand -hex 32)`,
    });
  }
  // A provider's client listed with the id of an own client, in any case: accepted, as the file
  // says, but the upstream, which reads X-Client-Id alone, may not tell the two apart.
  const own = new Map(
    file.clients.filter((c) => c.issuer === undefined).map((c) => [c.id.toLowerCase(), c.id]),
  );
  for (const [index, client] of file.clients.entries()) {
    const ownId = own.get(client.id.toLowerCase());
    if (client.issuer === undefined || ownId === undefined) continue;
    warnings.push({
      path: ["clients", index, "id"],
      message:
        ownId === client.id
          ? `is also the id of one of gatehouse's own clients: the upstream gets X-Client-Id ${client.id} for both, told apart only by X-Client-Issuer`
          : `differs only in case from ${ownId}, the id of one of gatehouse's own clients: an upstream that compares ids without case takes the two for one, told apart only by X-Client-Issuer`,
    });
  }
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

/** `tokens.dpop` and the clients' `dpop`, compiled for the token endpoint and the bearer stage. */
import { durationMs } from "../config/duration.js";
import { unsetVariable } from "../config/environment.js";
import type { FileConfig } from "../config/schema.js";
import type { BuildProblem } from "../config/problem.js";
import { createDpopNonces, nonceSecretOf } from "./dpop-nonce.js";
import type { ProofSettings } from "./dpop-proof.js";
import { MIN_HS256_BYTES, type KeyPair } from "./keys.js";

/** `tokens.dpop` compiled: how proofs are checked, and who must send one for a token. */
export interface DpopSettings extends ProofSettings {
  /** The own clients with `dpop: required`: their token requests need a proof. */
  readonly requiredClients: ReadonlySet<string>;
}

/** What compiling the settings reads: the environment, and where problems go. */
interface DpopBuildContext {
  readonly env: NodeJS.ProcessEnv;
  readonly problems: BuildProblem[];
}

// The secret nonces are made with: the variable `tokens.dpop.nonce_secret_env` names, else one
// derived from the signing key, which every replica issuing the same tokens holds.
async function nonceSecret(
  dpop: FileConfig["tokens"]["dpop"],
  current: KeyPair,
  context: DpopBuildContext,
): Promise<Uint8Array | undefined> {
  const name = dpop.nonce_secret_env;
  if (name === undefined) return nonceSecretOf(current.signingKey);
  const path = ["tokens", "dpop", "nonce_secret_env"];
  const unset = unsetVariable(context.env, name, path);
  if (unset !== undefined) {
    context.problems.push(unset);
    return undefined;
  }
  const secret = new Uint8Array(Buffer.from(context.env[name] as string, "utf8"));
  if (secret.length < MIN_HS256_BYTES) {
    context.problems.push({
      path,
      message: `${name} holds ${secret.length} bytes; nonces need a secret of at least ${MIN_HS256_BYTES}`,
    });
    return undefined;
  }
  return secret;
}

/** Compiles `tokens.dpop` for `own`, the clients gatehouse issues tokens to. */
export async function dpopSettings(
  file: FileConfig,
  current: KeyPair,
  own: FileConfig["clients"],
  context: DpopBuildContext,
): Promise<DpopSettings> {
  const { dpop } = file.tokens;
  const iatWindowMs = durationMs(dpop.iat_window);
  const secret = dpop.nonce ? await nonceSecret(dpop, current, context) : undefined;
  return {
    algorithms: dpop.algorithms,
    iatWindowSeconds: iatWindowMs / 1000,
    clockToleranceSeconds: durationMs(file.tokens.clock_tolerance) / 1000,
    // A nonce is good in the slot it was made in and the next: one to two windows.
    nonces: secret === undefined ? undefined : createDpopNonces(secret, iatWindowMs),
    requiredClients: new Set(
      own.filter((client) => client.dpop === "required").map((client) => client.id),
    ),
  };
}

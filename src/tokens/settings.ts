/**
 * The `tokens` and `clients` sections compiled for the token endpoint and the bearer stage: keys
 * read and imported, secrets resolved from the environment, hashes parsed. A problem is pushed with
 * its config path, so it is reported at its line like a schema error.
 */
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { durationMs } from "../config/duration.js";
import { readPem, unsetVariable } from "../config/environment.js";
import type { FileConfig } from "../config/schema.js";
import type { BuildProblem } from "../config/problem.js";
import type { FilesRead } from "../config/named-files.js";
import {
  keyPairFromPem,
  keyPairFromSecret,
  keyRing,
  MIN_HS256_BYTES,
  verificationKeyFromPem,
  type EphemeralKeys,
  type KeyPair,
  type KeyRing,
  type VerificationKey,
} from "./keys.js";
import {
  DEFAULT_SCRYPT,
  dummyRecord,
  parseSecretHash,
  type PlainSecrets,
  type SecretRecord,
} from "./secrets.js";
import { compileGrants, type ClientGrants } from "./grants.js";
import { parseClientKeys, type ClientKeys } from "./client-keys.js";
import { dpopSettings, type DpopSettings } from "./dpop-settings.js";
import { trustOf } from "./trust.js";

/** The clients allowed to obtain tokens. */
export interface ClientRegistry {
  /** Stored secrets by exact client id (ids are not case-folded). */
  readonly secrets: ReadonlyMap<string, SecretRecord>;
  /** Checked for an unknown id, so it costs what a wrong secret costs. */
  readonly dummy: SecretRecord;
  /** private_key_jwt clients' public keys by exact client id (`jwks_file`). */
  readonly assertionKeys: ReadonlyMap<string, ClientKeys>;
  /** Every listed client id, whichever way it authenticates. */
  readonly ids: ReadonlySet<string>;
}

/**
 * The token endpoint authentication methods in use (RFC 8414 §2
 * `token_endpoint_auth_methods_supported`) and the algorithms assertions may be signed with
 * (`token_endpoint_auth_signing_alg_values_supported`; empty without a private_key_jwt client).
 */
export function clientAuthentication(registry: ClientRegistry): {
  readonly methods: readonly string[];
  readonly assertionAlgorithms: readonly string[];
} {
  const methods: string[] = [];
  if (registry.secrets.size > 0) methods.push("client_secret_basic", "client_secret_post");
  const algorithms = new Set<string>();
  for (const keys of registry.assertionKeys.values()) {
    for (const alg of keys.algorithms) algorithms.add(alg);
  }
  if (algorithms.size > 0) methods.push("private_key_jwt");
  return { methods, assertionAlgorithms: [...algorithms].sort() };
}

/** Everything the token endpoint and the bearer stage need, precomputed. */
export interface TokenSettings {
  readonly path: string;
  /** `tokens.revocation_path`: the revocation endpoint (RFC 7009). */
  readonly revocationPath: string;
  readonly issuer: string;
  readonly audience: string;
  /** Whole seconds: `expires_in`, and `exp - iat`. */
  readonly ttlSeconds: number;
  readonly clockToleranceSeconds: number;
  /** `tokens.assertion_max_lifetime`: how far ahead of now a client assertion's `exp` may lie. */
  readonly assertionMaxLifetimeSeconds: number;
  readonly keys: KeyRing;
  readonly clients: ClientRegistry;
  /** Secret verifications (scrypt) run at once; `tokens.verify_concurrency`. */
  readonly verifyConcurrency: number;
  /** Failed client authentications and refused bearer tokens allowed per window, per client IP. */
  readonly failureLimit: FailureRule;
  /** True when no key is configured and the process's generated key signs. */
  readonly ephemeralKey: boolean;
  /** `tokens.scopes`: every scope gatehouse knows. */
  readonly scopes: readonly string[];
  /** What each client may be granted, by client id. */
  readonly grants: ReadonlyMap<string, ClientGrants>;
  /** `tokens.trusted_issuers`, in the file's order. */
  readonly trustedIssuers: readonly TrustedIssuer[];
  /**
   * Whether gatehouse issues and accepts tokens of its own: some client authenticates to it, or
   * no provider is trusted. False is resource-server-only mode: no token or revocation endpoint,
   * no signing key.
   */
  readonly ownTokens: boolean;
  /** `tokens.dpop`, and the clients that must prove a key at the token endpoint. */
  readonly dpop: DpopSettings;
  /**
   * The digest of the keys, issuers and clients (trust.ts): equal, and what was verified or
   * remembered under one configuration holds under the other.
   */
  readonly trust: string;
}

/** A client `clients` lists for a trusted issuer. */
export interface ProviderClient {
  /** `scopes`: what its tokens' scopes are capped to; undefined when the entry lists none. */
  readonly scopeCap: ReadonlySet<string> | undefined;
}

/** One `tokens.trusted_issuers` entry, compiled. */
export interface TrustedIssuer {
  readonly name: string;
  /** The `iss` its tokens carry, compared exactly. */
  readonly issuer: string;
  /** "" to discover it from the issuer's metadata. */
  readonly jwksUri: string;
  readonly audiences: readonly string[];
  /** The claim naming the client; undefined: `client_id`, else `azp`. */
  readonly clientClaim: string | undefined;
  readonly algorithms: readonly string[];
  /** The plan of clients `clients` does not list; undefined refuses them. */
  readonly plan: string | undefined;
  /** The clients listed with `issuer: <name>`, by id. */
  readonly clients: ReadonlyMap<string, ProviderClient>;
  /**
   * The ids of gatehouse's own clients in lower case, which an unlisted client of this issuer may
   * not take in any case: an upstream may compare ids without case, as the config's check does.
   */
  readonly ownClientIds: ReadonlySet<string>;
}

/** `tokens.failure_limit`: failed authentications allowed per window. */
export interface FailureRule {
  readonly limit: number;
  readonly windowMs: number;
  /** The window as written in the file (`1m`), named in 429 bodies. */
  readonly window: string;
}

/** What compiling the token settings may use. */
export interface TokenBuildContext {
  readonly baseDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly ephemeralKeys: EphemeralKeys;
  readonly plainSecrets: PlainSecrets;
  readonly problems: BuildProblem[];
  /** Where each file read is recorded, for the snapshot's identity and the watch. */
  readonly read: FilesRead;
}

async function currentKey(
  signing: FileConfig["tokens"]["signing"],
  context: TokenBuildContext,
): Promise<KeyPair | undefined> {
  const { algorithm } = signing;
  if (algorithm === "HS256") {
    if (signing.secret_env === undefined) return undefined;
    const path = ["tokens", "signing", "secret_env"];
    const unset = unsetVariable(context.env, signing.secret_env, path);
    if (unset !== undefined) {
      context.problems.push(unset);
      return undefined;
    }
    const secret = new Uint8Array(Buffer.from(context.env[signing.secret_env] as string, "utf8"));
    if (secret.length < MIN_HS256_BYTES) {
      context.problems.push({
        path,
        message: `${signing.secret_env} holds ${secret.length} byte${secret.length === 1 ? "" : "s"}; HS256 needs at least ${MIN_HS256_BYTES}`,
      });
      return undefined;
    }
    return keyPairFromSecret(secret);
  }
  if (signing.key_file === undefined) return undefined;
  const path = ["tokens", "signing", "key_file"];
  const pem = await readPem(context, signing.key_file, path);
  if (pem === undefined) return undefined;
  try {
    return await keyPairFromPem(pem, algorithm);
  } catch (error) {
    context.problems.push({
      path,
      message: `is not a PKCS#8 PEM private key for ${algorithm} (${(error as Error).message}); make one with gatehouse keygen --alg ${algorithm}`,
    });
    return undefined;
  }
}

async function previousKeys(
  tokens: FileConfig["tokens"],
  context: TokenBuildContext,
): Promise<VerificationKey[]> {
  const { algorithm } = tokens.signing;
  if (algorithm === "HS256") return [];
  const keys = await Promise.all(
    tokens.previous_keys.map(async (file, index) => {
      const path = ["tokens", "previous_keys", index];
      const pem = await readPem(context, file, path);
      if (pem === undefined) return undefined;
      try {
        return await verificationKeyFromPem(pem, algorithm);
      } catch (error) {
        context.problems.push({
          path,
          message: `is not a PEM public key for ${algorithm} (${(error as Error).message})`,
        });
        return undefined;
      }
    }),
  );
  return keys.filter((key) => key !== undefined);
}

async function clientRegistry(
  clients: FileConfig["clients"],
  context: TokenBuildContext,
): Promise<ClientRegistry> {
  const keyEntries = await Promise.all(
    clients.map(async (client, index): Promise<[string, ClientKeys] | undefined> => {
      if (client.jwks_file === undefined) return undefined;
      const path = ["clients", index, "jwks_file"];
      const text = await readPem(context, client.jwks_file, path);
      if (text === undefined) return undefined;
      const keys = await parseClientKeys(text);
      if (typeof keys === "string") {
        context.problems.push({ path, message: keys });
        return undefined;
      }
      return [client.id, keys];
    }),
  );
  const entries = await Promise.all(
    clients.map(async (client, index): Promise<[string, SecretRecord] | undefined> => {
      if (client.jwks_file !== undefined) return undefined;
      if (client.secret_hash !== undefined) {
        const record = parseSecretHash(client.secret_hash);
        if (typeof record === "string") {
          context.problems.push({ path: ["clients", index, "secret_hash"], message: record });
          return undefined;
        }
        return [client.id, record];
      }
      const name = client.secret_env as string;
      const unset = unsetVariable(context.env, name, ["clients", index, "secret_env"]);
      if (unset !== undefined) {
        context.problems.push(unset);
        return undefined;
      }
      return [client.id, await context.plainSecrets.record(context.env[name] as string)];
    }),
  );
  const secrets = new Map(entries.filter((entry) => entry !== undefined));
  // The dummy costs what the configured secrets cost: hash-secret gives them all one cost.
  const first = secrets.values().next();
  return {
    secrets,
    dummy: dummyRecord(first.done ? DEFAULT_SCRYPT : first.value.params),
    assertionKeys: new Map(keyEntries.filter((entry) => entry !== undefined)),
    ids: new Set(clients.map((client) => client.id)),
  };
}

function trustedIssuers(file: FileConfig, ownClientIds: ReadonlySet<string>): TrustedIssuer[] {
  return file.tokens.trusted_issuers.map((entry) => ({
    name: entry.name,
    issuer: entry.issuer,
    jwksUri: entry.jwks_uri,
    audiences: entry.audiences ?? [file.tokens.audience],
    clientClaim: entry.client_claim,
    algorithms: entry.algorithms,
    plan: entry.plan,
    clients: new Map(
      file.clients
        .filter((client) => client.issuer === entry.name)
        .map((client) => [
          client.id,
          { scopeCap: client.scopes.length === 0 ? undefined : new Set(client.scopes) },
        ]),
    ),
    ownClientIds,
  }));
}

/** Compiles the token settings; problems go to `context.problems`. */
export async function compileTokens(
  file: FileConfig,
  context: TokenBuildContext,
): Promise<TokenSettings> {
  const { tokens } = file;
  const ttlMs = durationMs(tokens.ttl);
  // The clients that authenticate to gatehouse; a provider's clients authenticate to it.
  const own = file.clients.filter((client) => client.issuer === undefined);
  const ownTokens = own.length > 0 || tokens.trusted_issuers.length === 0;
  const [configured, previous, clients] = await Promise.all([
    currentKey(tokens.signing, context),
    previousKeys(tokens, context),
    clientRegistry(own, context),
  ]);
  // In resource-server-only mode the key signs nothing: it is made only so that the key ring has
  // one, and its absence is not warned about.
  const current = configured ?? (await context.ephemeralKeys.get(tokens.signing.algorithm));
  const keys = keyRing(current, previous);
  const jwksFiles = own.flatMap((client) =>
    client.jwks_file === undefined
      ? []
      : [context.read.get(resolve(context.baseDir, client.jwks_file)) ?? ""],
  );
  return {
    path: tokens.path,
    revocationPath: tokens.revocation_path,
    issuer: tokens.issuer,
    audience: tokens.audience,
    ttlSeconds: Math.ceil(ttlMs / 1000),
    clockToleranceSeconds: durationMs(tokens.clock_tolerance) / 1000,
    assertionMaxLifetimeSeconds: durationMs(tokens.assertion_max_lifetime) / 1000,
    keys,
    clients,
    verifyConcurrency: tokens.verify_concurrency ?? availableParallelism(),
    failureLimit: {
      limit: tokens.failure_limit.limit,
      windowMs: durationMs(tokens.failure_limit.window),
      window: tokens.failure_limit.window,
    },
    ephemeralKey: configured === undefined && ownTokens,
    scopes: tokens.scopes,
    grants: compileGrants(own, tokens.audience),
    trustedIssuers: trustedIssuers(file, new Set([...clients.ids].map((id) => id.toLowerCase()))),
    ownTokens,
    dpop: await dpopSettings(file, current, own, context),
    trust: trustOf({ file, keys, secrets: clients.secrets, jwksFiles }),
  };
}

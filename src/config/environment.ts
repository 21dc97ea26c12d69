/**
 * What a configuration needs from its surroundings: the environment variables it names and the
 * key files it reads. Building a snapshot checks them fully; when the schema has already refused
 * the file, they are checked here on the raw data, so that one run reports every kind of problem.
 */
import { accessSync, constants } from "node:fs";
import { resolve } from "node:path";
import type { BuildProblem } from "./problem.js";

/** Where relative key files are found, and the variables secrets are read from. */
export interface Surroundings {
  readonly env: NodeJS.ProcessEnv;
  readonly baseDir: string;
}

/** The problem with a variable named by `secret_env`, or undefined when it is set. */
export function unsetVariable(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === "" ? `names ${name}, which is not set` : undefined;
}

/** The problem with a key file that cannot be read. */
export function unreadableFile(file: string, error: unknown): string {
  const reason = (error as NodeJS.ErrnoException).code ?? String(error);
  return `cannot read ${JSON.stringify(file)} (${reason})`;
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

function variable(path: PropertyKey[], name: unknown, around: Surroundings): BuildProblem[] {
  if (typeof name !== "string") return [];
  const message = unsetVariable(around.env, name);
  return message === undefined ? [] : [{ path, message }];
}

function readable(path: PropertyKey[], file: unknown, around: Surroundings): BuildProblem[] {
  if (typeof file !== "string" || file === "") return [];
  try {
    accessSync(resolve(around.baseDir, file), constants.R_OK);
    return [];
  } catch (error) {
    return [{ path, message: unreadableFile(file, error) }];
  }
}

/** The unset variables and unreadable key files that raw, unvalidated config data names. */
export function environmentProblems(data: unknown, around: Surroundings): BuildProblem[] {
  const signing = field(field(data, "tokens"), "signing");
  const previous = field(field(data, "tokens"), "previous_keys");
  const clients = field(data, "clients");
  // As building does: HS256 reads its secret, the other algorithms their key files.
  const hs256 = field(signing, "algorithm") === "HS256";
  return [
    ...(hs256
      ? variable(["tokens", "signing", "secret_env"], field(signing, "secret_env"), around)
      : [
          ...readable(["tokens", "signing", "key_file"], field(signing, "key_file"), around),
          ...(Array.isArray(previous) ? previous : []).flatMap((file, index) =>
            readable(["tokens", "previous_keys", index], file, around),
          ),
        ]),
    ...(Array.isArray(clients) ? clients : []).flatMap((client, index) =>
      variable(["clients", index, "secret_env"], field(client, "secret_env"), around),
    ),
  ];
}

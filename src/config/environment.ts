/**
 * What a configuration needs from its surroundings: the environment variables it names and the
 * key files it reads. Building a snapshot checks them fully; when the schema has already refused
 * the file, they are checked here on the raw data, so that one run reports every kind of problem.
 */
import { resolve } from "node:path";
import type { BuildProblem } from "./problem.js";
import {
  KEY_FILE_CAP,
  readRegularFile,
  readRegularFileSync,
  unreadableReason,
} from "./regular-file.js";
import { digestNow, fileHash, type FilesRead } from "./named-files.js";

/** Where relative key files are found, and the variables secrets are read from. */
export interface Surroundings {
  readonly env: NodeJS.ProcessEnv;
  readonly baseDir: string;
  /**
   * `check --no-env`: leave out what only the deployment provides (unset variables, missing
   * files), so that a file can be checked away from its secrets.
   */
  readonly withoutEnvironment?: boolean;
}

/** The problem with the variable `name`, named at `path`, or undefined when it is set. */
export function unsetVariable(
  env: NodeJS.ProcessEnv,
  name: string,
  path: readonly PropertyKey[],
): BuildProblem | undefined {
  const value = env[name];
  return value === undefined || value === ""
    ? { path, message: `names ${name}, which is not set`, environment: true }
    : undefined;
}

/** The problem with a file named at `path` that cannot be read; a missing one is the deployment's. */
export function unreadableFile(
  file: string,
  error: unknown,
  path: readonly PropertyKey[],
): BuildProblem {
  const reason = unreadableReason(error);
  const message = `cannot read ${JSON.stringify(file)} (${reason})`;
  return reason === "ENOENT" ? { path, message, environment: true } : { path, message };
}

// How to fill a file the config names, by the key naming it.
const FILL: Record<string, (file: string) => string> = {
  key_file: (file) => `; make a key with gatehouse keygen --out ${file}`,
  previous_keys: (file) =>
    `; write the old key's public half with gatehouse pubkey OLD.pem > ${file}`,
  jwks_file: (file) =>
    `; make a client key and its JWKS with gatehouse keygen --out CLIENT.pem --jwks ${file}`,
};

// An empty file is refused by name: a PEM parser would only say it holds no key, which sends an
// operator looking for a wrong format rather than a failed copy or an unfilled Secret.
function emptyFile(file: string, text: string, path: readonly PropertyKey[]): BuildProblem[] {
  if (text.trim() !== "") return [];
  const key = path.findLast((step) => typeof step === "string") as string;
  return [{ path, message: `${JSON.stringify(file)} is empty${FILL[key]?.(file) ?? ""}` }];
}

/** Where key files are found, where their problems go, and where each file read is recorded. */
export interface FileContext {
  readonly baseDir: string;
  readonly problems: BuildProblem[];
  readonly read: FilesRead;
}

/**
 * Reads a key file (PEM, or a JWKS) named in the config, relative to `baseDir`, and records it in
 * `read`; a file that cannot be read, or is empty, is a problem pushed at `path`.
 */
export async function readPem(
  { baseDir, problems, read }: FileContext,
  file: string,
  path: readonly PropertyKey[],
): Promise<string | undefined> {
  const absolute = resolve(baseDir, file);
  let text: string;
  try {
    text = await readRegularFile(absolute, KEY_FILE_CAP);
  } catch (error) {
    // What the watch will compare with: a key file over its cap still has a content to change.
    read.set(absolute, await digestNow(absolute));
    problems.push(unreadableFile(file, error, path));
    return undefined;
  }
  read.set(absolute, fileHash(text));
  const empty = emptyFile(file, text, path);
  problems.push(...empty);
  return empty.length === 0 ? text : undefined;
}

/** Leaves out the problems `check --no-env` does not report. */
export function reported(
  problems: readonly BuildProblem[],
  around: Pick<Surroundings, "withoutEnvironment">,
): BuildProblem[] {
  return around.withoutEnvironment === true
    ? problems.filter((problem) => problem.environment !== true)
    : [...problems];
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null
    ? (value as Record<string, unknown>)[key]
    : undefined;
}

function variable(path: PropertyKey[], name: unknown, around: Surroundings): BuildProblem[] {
  if (typeof name !== "string") return [];
  const problem = unsetVariable(around.env, name, path);
  return problem === undefined ? [] : [problem];
}

function readable(path: PropertyKey[], file: unknown, around: Surroundings): BuildProblem[] {
  if (typeof file !== "string" || file === "") return [];
  try {
    return emptyFile(file, readRegularFileSync(resolve(around.baseDir, file), KEY_FILE_CAP), path);
  } catch (error) {
    return [unreadableFile(file, error, path)];
  }
}

/** The unset variables and unreadable key files that raw, unvalidated config data names. */
export function environmentProblems(data: unknown, around: Surroundings): BuildProblem[] {
  const signing = field(field(data, "tokens"), "signing");
  const previous = field(field(data, "tokens"), "previous_keys");
  const clients = field(data, "clients");
  // As building does: HS256 reads its secret, the other algorithms their key files.
  const hs256 = field(signing, "algorithm") === "HS256";
  return reported(
    [
      ...(hs256
        ? variable(["tokens", "signing", "secret_env"], field(signing, "secret_env"), around)
        : [
            ...readable(["tokens", "signing", "key_file"], field(signing, "key_file"), around),
            ...(Array.isArray(previous) ? previous : []).flatMap((file, index) =>
              readable(["tokens", "previous_keys", index], file, around),
            ),
          ]),
      ...(Array.isArray(clients) ? clients : []).flatMap((client, index) => [
        ...variable(["clients", index, "secret_env"], field(client, "secret_env"), around),
        ...readable(["clients", index, "jwks_file"], field(client, "jwks_file"), around),
      ]),
    ],
    around,
  );
}

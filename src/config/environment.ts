/**
 * What a configuration needs from its surroundings: the environment variables it names and the
 * key files it reads. Building a snapshot checks them fully; when the schema has already refused
 * the file, they are checked on the raw data, so that one run reports every kind of problem.
 */
import { resolve } from "node:path";
import type { BuildProblem } from "./problem.js";
import { KEY_FILE_CAP, readRegularFileWithin, unreadableReason } from "./regular-file.js";
import { digestAfter, fileHash, type FilesRead } from "./named-files.js";

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
    text = await readRegularFileWithin(absolute, KEY_FILE_CAP);
  } catch (error) {
    // What the watch will compare with: a key file over its cap still has a content to change.
    read.set(absolute, await digestAfter(absolute, error));
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

/** A key file that raw config data names, and where. */
export interface NamedKeyFile {
  readonly path: readonly PropertyKey[];
  readonly file: string;
}

function keyFile(path: PropertyKey[], file: unknown): NamedKeyFile[] {
  return typeof file === "string" && file !== "" ? [{ path, file }] : [];
}

/**
 * What raw, unvalidated config data needs from its surroundings: the problems of the variables it
 * names, and the key files it names, which keyFileProblems reads (a read may wait, so it is not
 * made where the data is parsed).
 */
export function environmentNeeds(
  data: unknown,
  around: Surroundings,
): { readonly problems: BuildProblem[]; readonly keyFiles: NamedKeyFile[] } {
  const signing = field(field(data, "tokens"), "signing");
  const previous = field(field(data, "tokens"), "previous_keys");
  const listed = field(data, "clients");
  const clients: unknown[] = Array.isArray(listed) ? listed : [];
  // As building does: HS256 reads its secret, the other algorithms their key files.
  const hs256 = field(signing, "algorithm") === "HS256";
  const problems = [
    ...(hs256
      ? variable(["tokens", "signing", "secret_env"], field(signing, "secret_env"), around)
      : []),
    ...clients.flatMap((client, index) =>
      variable(["clients", index, "secret_env"], field(client, "secret_env"), around),
    ),
  ];
  const keyFiles = [
    ...(hs256
      ? []
      : [
          ...keyFile(["tokens", "signing", "key_file"], field(signing, "key_file")),
          ...(Array.isArray(previous) ? previous : []).flatMap((file, index) =>
            keyFile(["tokens", "previous_keys", index], file),
          ),
        ]),
    ...clients.flatMap((client, index) =>
      keyFile(["clients", index, "jwks_file"], field(client, "jwks_file")),
    ),
  ];
  return { problems: reported(problems, around), keyFiles };
}

/** The problems of a key file that raw config data names: unreadable, or empty. */
export async function keyFileProblems(
  { path, file }: NamedKeyFile,
  around: Surroundings,
): Promise<BuildProblem[]> {
  let problems: BuildProblem[];
  try {
    const text = await readRegularFileWithin(resolve(around.baseDir, file), KEY_FILE_CAP);
    problems = emptyFile(file, text, path);
  } catch (error) {
    problems = [unreadableFile(file, error, path)];
  }
  return reported(problems, around);
}

/** `gatehouse [COMMAND] [OPTIONS]`: reads the command line and runs the command it names. */
import { parseArgs } from "node:util";
import {
  COMMANDS,
  type Command,
  commandHelp,
  findCommand,
  help,
  OPTIONS,
  usage,
} from "./commands.js";

function usageError(message: string): number {
  process.stderr.write(`gatehouse: ${message}\n${usage()}`);
  return 2;
}

type Token = NonNullable<ReturnType<typeof parseArgs>["tokens"]>[number];

// What is wrong with one option as typed, or undefined. The options are checked here rather than
// by parseArgs' strict mode, whose messages name no way forward.
function optionProblem(token: Token): string | undefined {
  if (token.kind !== "option") return undefined;
  const option = (OPTIONS as Record<string, { type: "string" | "boolean" }>)[token.name];
  if (option === undefined) {
    return `unknown option ${token.rawName}; gatehouse help lists every command and its options`;
  }
  if (option.type === "boolean") {
    return token.value === undefined ? undefined : `${token.rawName} takes no value`;
  }
  if (token.value === undefined) return `${token.rawName} needs a value`;
  if (!token.inlineValue && token.value.startsWith("-")) {
    return `${token.rawName} needs a value (for one that starts with -, write ${token.rawName}=${token.value})`;
  }
  return undefined;
}

/** Runs the command line `argv`; resolves with the exit code: 0 success, 1 failure, 2 usage. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals, tokens } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: OPTIONS,
    strict: false,
    tokens: true,
  });
  for (const token of tokens) {
    const problem = optionProblem(token);
    if (problem !== undefined) return usageError(problem);
  }
  const [name = "run", ...args] = positionals;
  const command = findCommand(name);
  if (command === undefined) return usageError(`unknown command ${JSON.stringify(name)}`);
  if (values.version === true) {
    if (positionals.length > 0 || Object.keys(values).length > 1) {
      return usageError("--version takes no command or other option");
    }
    const version = findCommand("version") as Command;
    return version.run({ values, positionals, env, help: commandHelp(version) });
  }
  if (values.help === true) return help(positionals.length === 0 ? undefined : name);
  for (const option of Object.keys(values)) {
    if (!command.options.includes(option)) {
      const owners = COMMANDS.filter((other) => other.options.includes(option));
      // "run and check", "run, check and token".
      const of = new Intl.ListFormat("en-GB").format(owners.map((owner) => owner.name));
      return usageError(`--${option} is an option of ${of}, not of ${name}`);
    }
  }
  if (args.length > command.maxArgs) {
    const extra = JSON.stringify(args[command.maxArgs]);
    return usageError(`unexpected argument ${extra}: gatehouse ${command.usage}`);
  }
  return command.run({ values, positionals: args, env, help: commandHelp(command) });
}

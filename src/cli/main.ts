/** `gatehouse [COMMAND] [OPTIONS]`: reads the command line and runs the command it names. */
import { parseArgs } from "node:util";
import { COMMANDS, type Command, findCommand, help, OPTIONS, usage } from "./commands.js";

function usageError(message: string): number {
  process.stderr.write(`gatehouse: ${message}\n${usage()}`);
  return 2;
}

/** Runs the command line `argv`; resolves with the exit code: 0 success, 1 failure, 2 usage. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], allowPositionals: true, options: OPTIONS });
  } catch (error) {
    return usageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [name = "run", ...args] = positionals;
  const command = findCommand(name);
  if (command === undefined) return usageError(`unknown command ${JSON.stringify(name)}`);
  if (values.version === true) {
    if (positionals.length > 0 || Object.keys(values).length > 1) {
      return usageError("--version takes no command or other option");
    }
    return (findCommand("version") as Command).run({ values, positionals, env });
  }
  if (values.help === true) return help(positionals.length === 0 ? undefined : name);
  for (const option of Object.keys(values)) {
    if (!command.options.includes(option)) {
      const owners = COMMANDS.filter((other) => other.options.includes(option));
      const of = owners.map((owner) => owner.name).join(" and ");
      return usageError(`--${option} is an option of ${of}, not of ${name}`);
    }
  }
  if (args.length > command.maxArgs) {
    const extra = JSON.stringify(args[command.maxArgs]);
    return usageError(`unexpected argument ${extra}: gatehouse ${command.usage}`);
  }
  return command.run({ values, positionals: args, env });
}

/**
 * CLI entry: pick the command, parse its flags from the option table, run it, map
 * errors to the documented exit codes. Error messages go to stderr, one line each,
 * and never contain the key (see core/secret.ts).
 */
import { describeError, exitCodeOf, ConfigError } from "../core/errors.js";
import { redactSecrets } from "../core/secret.js";
import { VERSION } from "../core/version.js";
import { commandHelp, findCommand, mainHelp, parseCommandArgs, type CommandRun } from "./options.js";
import { forTerminal } from "../core/terminal.js";

const handlers: Record<string, () => Promise<{ default: CommandRun }>> = {
  sync: () => import("./commands/sync.js"),
  check: () => import("./commands/check.js"),
  simulate: () => import("./commands/simulate.js"),
  demo: () => import("./commands/demo.js"),
  daemon: () => import("./commands/daemon.js"),
  status: () => import("./commands/status.js"),
  stock: () => import("./commands/stock.js"),
  reconcile: () => import("./commands/reconcile.js"),
  changes: () => import("./commands/changes.js"),
  publish: () => import("./commands/publish.js"),
};

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "help" && rest[0] && findCommand(rest[0])) {
    process.stdout.write(commandHelp(findCommand(rest[0])!) + "\n");
    return 0;
  }
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(mainHelp() + "\n");
    return name ? 0 : 2;
  }
  if (name === "--version" || name === "-v") {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const cmd = findCommand(name);
  const load = handlers[name];
  if (!cmd || !load) {
    process.stderr.write(`inventory-mirror: unknown command "${name}". Run 'inventory-mirror --help' for the list.\n`);
    return 2;
  }
  try {
    const values = parseCommandArgs(cmd, rest);
    if (values.help) {
      process.stdout.write(commandHelp(cmd) + "\n");
      return 0;
    }
    const { default: run } = await load();
    return await run(values);
  } catch (err) {
    const code = exitCodeOf(err);
    const prefix = err instanceof ConfigError ? "configuration error" : "error";
    process.stderr.write(`inventory-mirror ${name}: ${prefix}: ${forTerminal(redactSecrets(describeError(err)))}\n`);
    return code;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`inventory-mirror: unexpected error: ${forTerminal(redactSecrets(describeError(err)))}\n`);
    process.exitCode = 1;
  },
);

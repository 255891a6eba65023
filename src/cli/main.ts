#!/usr/bin/env node
/**
 * The `policyloop` command, parsed by commander. Each command's module is loaded only when it
 * runs, so `policyloop --help` does not load the service or the engine. Exit codes: 0 success,
 * 1 the operation failed, 2 a usage error.
 * @module
 */
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import { declareChat } from './commands/chat-command.js';
import { declareEval } from './commands/eval-command.js';
import { declareExport } from './commands/export-command.js';
import { declareHistory } from './commands/history-command.js';
import { declareReport } from './commands/report-command.js';
import { declareRescore } from './commands/rescore-command.js';
import { declareCheckpoints, declareHealth, declareJobs, declareModels } from './commands/resources-command.js';
import { declareServe } from './commands/serve-command.js';
import { COMMON_HELP, type CommandContext } from './declaration.js';

/** The package's version, for `--version`. */
function packageVersion(): string {
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

/** The commands in the order `--help` lists them; each is declared beside its handler in `commands/`. */
const COMMANDS: readonly ((context: CommandContext) => Command)[] = [
  declareServe,
  declareExport,
  declareHealth,
  declareModels,
  declareCheckpoints,
  declareJobs,
  declareHistory,
  declareChat,
  declareReport,
  declareEval,
  declareRescore,
];

/** Builds the program; `setExitCode` receives each action's exit code. */
function buildProgram(setExitCode: (code: number) => void): Command {
  const program = new Command('policyloop');
  program
    .usage('<command> [options]')
    .description('Train LLM agents with RL: the local service, and a look at models, jobs, metrics and trajectories.')
    .version(packageVersion(), '-v, --version')
    .addOption(new Option('--base-url <url>', 'the training API').hideHelp())
    .addOption(new Option('--api-key <key>', 'its key').hideHelp())
    .enablePositionalOptions()
    .exitOverride()
    .showHelpAfterError()
    .addHelpText(
      'after',
      `${COMMON_HELP}\n\nRun \`policyloop <command> --help\` for a command's options; docs/cli.md has examples.`,
    );
  const context: CommandContext = { program, setExitCode };
  for (const declare of COMMANDS) declare(context);
  return program;
}

/**
 * Runs the CLI with `argv` (without the node and script paths) and resolves to the exit code:
 * 0 success, 1 the operation failed (one line on stderr says why), 2 a usage error.
 * @example
 * process.exitCode = await main(['models', 'list', '--json']);
 */
export async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  const program = buildProgram((code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version end with code 0; every parse error is a usage error.
      return error.exitCode === 0 ? 0 : 2;
    }
    const { errorLine, UsageError } = await import('./context.js');
    process.stderr.write(`policyloop: ${errorLine(error)}\n`);
    return error instanceof UsageError ? 2 : 1;
  }
}

/** True when this file is the process's entry script (also through npm's `bin` symlink). */
function isEntryScript(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

// Run only when executed as a script (not when imported by tests).
if (isEntryScript()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    async (error: unknown) => {
      const { errorLine } = await import('./context.js');
      process.stderr.write(`policyloop: ${errorLine(error)}\n`);
      process.exitCode = 1;
    },
  );
}

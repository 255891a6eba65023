/**
 * What every command's declaration shares: the program it is added to, the exit code its action
 * reports, the connection options, and the action that makes a client. Only commander and types
 * are imported here (and by the `commands/*-command.ts` declarations): a command's handler module
 * is loaded when the command runs, so `policyloop --help` loads neither the client nor the engine.
 */
import type { Command } from 'commander';
import type { TrainingClient } from '../client/index.js';
import type { CommonOptions } from './context.js';

/** What a command's declaration is given by `main.ts`. */
export interface CommandContext {
  /** The `policyloop` program: the command is added to it (it also holds the options given before the command). */
  readonly program: Command;
  /** Reports the action's exit code (0 success, 1 the operation failed, 2 a usage error). */
  readonly setExitCode: (code: number) => void;
}

/** A command's work with a client: resolves to its exit code. */
export type ClientWork<A extends unknown[]> = (
  client: TrainingClient,
  options: CommonOptions & Record<string, never>,
  ...args: A
) => Promise<number>;

/** The connection options listed under every command that talks to a service, for the program's help. */
export const COMMON_HELP = `
Connection (health, models, checkpoints, jobs, history, chat, report; eval takes its own --base-url):
  --base-url URL   the training API (default: $POLICYLOOP_BASE_URL, else the hosted service)
  --api-key KEY    its key (default: $POLICYLOOP_API_KEY, else $WANDB_API_KEY)
  --json           machine-readable output (JSON lines for lists and streams)`;

/** Adds `--base-url`, `--api-key` and `--json` to a command that talks to a service. */
export function withCommonOptions(command: Command): Command {
  return command
    .option('--base-url <url>', 'the training API (default: $POLICYLOOP_BASE_URL, else the hosted service)')
    .option('--api-key <key>', 'its key (default: $POLICYLOOP_API_KEY, else $WANDB_API_KEY)')
    .option('--json', 'machine-readable output (JSON lines for lists and streams)');
}

/** Collects the values of a repeatable option (`--model a --model b`) in order. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** The connection options of `command`: its own, else the program's (given before the command). */
function commonOptions(context: CommandContext, command: Command): CommonOptions {
  const own = command.opts<CommonOptions>();
  const global = context.program.opts<CommonOptions>();
  return { baseUrl: own.baseUrl ?? global.baseUrl, apiKey: own.apiKey ?? global.apiKey, json: own.json };
}

/**
 * A commander action that runs `work` with a client made from the command's options (and the
 * program's, given before the command) and the command's arguments, and reports its exit code.
 */
export function withClient<A extends unknown[]>(
  context: CommandContext,
  work: ClientWork<A>,
): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]): Promise<void> => {
    const command = args.at(-1) as Command;
    const positional = args.slice(0, -2) as A;
    const options = { ...command.opts(), ...commonOptions(context, command) } as CommonOptions & Record<string, never>;
    const { makeClient } = await import('./context.js');
    context.setExitCode(await work(makeClient(options), options, ...positional));
  };
}

/** The shape of a `policyloop` subcommand. */

/** A subcommand: parses its own arguments and resolves to the process exit code. */
export interface Command {
  /** Runs with the arguments after the command name. */
  run(argv: readonly string[]): Promise<number>;
}

/** The error of an MCP server that cannot be used. */
import { PolicyloopError } from '../../internal/errors.js';

/** Why an MCP server failed: what a `catch` may branch on. */
export type McpServerFailure =
  /** The command does not exist or cannot be run. */
  | 'spawn'
  /** The server exited (or closed the connection) before or during `initialize`. */
  | 'exited'
  /** The URL could not be reached, or answered with an HTTP error. */
  | 'unreachable'
  /** `initialize` or the tool listing outlived `startTimeout`. */
  | 'timeout'
  /** The server answered, but not as MCP (a bad `initialize` or `tools/list` reply). */
  | 'protocol'
  /** The config (or the config function) was not usable. */
  | 'config'
  /** A tool listed in `options.tools` is not offered by the server. */
  | 'tools';

/**
 * An MCP server could not be started, connected or listed: a command that does not exist, a
 * server that exits during `initialize`, an unreachable URL, a start past `startTimeout`.
 * `server` names it (the `name` option, or its command or URL); `stderr` keeps the last lines the
 * process wrote, when it is a command. A run that starts an environment fails with it before any
 * rollout is counted; a per-rollout server that fails to start fails that rollout.
 * @example
 * try {
 *   await trainer.run();
 * } catch (error) {
 *   if (error instanceof McpServerError) console.error(error.server, error.reason, error.stderr);
 * }
 */
export class McpServerError extends PolicyloopError {
  /** The server's name, as messages give it. */
  readonly server: string;
  /** What went wrong. */
  readonly reason: McpServerFailure;
  /** The last lines the server process wrote to stderr (empty for a URL, or when it wrote none). */
  readonly stderr: string;

  /**
   * @param server The server's name.
   * @param reason What went wrong.
   * @param message What happened, after "MCP server `<server>` ".
   * @param options The `cause`, and the server's `stderr`.
   */
  constructor(
    server: string,
    reason: McpServerFailure,
    message: string,
    options: { cause?: unknown; stderr?: string | undefined } = {},
  ) {
    const stderr = options.stderr?.trim() ?? '';
    super(
      `MCP server \`${server}\` ${message}${stderr === '' ? '' : `\n--- its stderr ---\n${stderr}`}`,
      'cause' in options ? { cause: options.cause } : {},
    );
    this.server = server;
    this.reason = reason;
    this.stderr = stderr;
  }
}

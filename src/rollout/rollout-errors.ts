/** Errors of rollouts and of gathering them. */
import { PolicyloopError } from '../internal/errors.js';
import type { TrajectoryException } from '../schema/index.js';

/**
 * A rollout attempt (or a group's `scoreGroup`) ran longer than the gather's `timeout`. Retryable.
 */
export class RolloutTimeoutError extends PolicyloopError {
  /** The limit that was exceeded, in milliseconds. */
  readonly timeoutMs: number;

  /** `what` names what timed out in the message. */
  constructor(timeoutMs: number, what = 'Rollout') {
    super(`${what} did not finish within its timeout of ${timeoutMs} ms`, { retryable: true });
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A rollout returned something that is not a trajectory (the zod issues are kept in `issues`).
 * Not retryable: the same code returns the same shape again.
 */
export class InvalidTrajectoryError extends PolicyloopError {
  /** The validation issues, as data. */
  readonly issues: readonly unknown[];

  constructor(message: string, issues: readonly unknown[]) {
    super(message);
    this.issues = issues;
  }
}

/**
 * More rollouts failed than the gather's `maxExceptions` allows, so the gather stopped and
 * aborted the rollouts still running. `exceptions` holds every failure so far as
 * `{type, message, traceback}`; `errors` the thrown values themselves.
 */
export class ExceptionBudgetExceededError extends PolicyloopError {
  /** The failures, in the wire shape of `TrajectoryGroup.exceptions`. */
  readonly exceptions: readonly TrajectoryException[];
  /** The errors the failed rollouts threw, in the same order. */
  readonly errors: readonly unknown[];
  /** The budget: a count (>= 1 or 0) or a fraction of all rollouts (between 0 and 1). */
  readonly maxExceptions: number;
  /** How many rollouts the gather was to run. */
  readonly total: number;

  constructor(options: { exceptions: TrajectoryException[]; errors: unknown[]; maxExceptions: number; total: number }) {
    const { exceptions, maxExceptions, total } = options;
    const budget =
      maxExceptions > 0 && maxExceptions < 1
        ? `${Number((maxExceptions * 100).toPrecision(6))}% of ${total} rollouts`
        : `${maxExceptions} of ${total} rollouts`;
    const last = exceptions[exceptions.length - 1];
    super(
      `${exceptions.length} rollouts failed, more than the exception budget of ${budget}` +
        (last ? `; last failure: ${last.type}: ${last.message}` : ''),
      { cause: options.errors[options.errors.length - 1] },
    );
    this.exceptions = exceptions;
    this.errors = options.errors;
    this.maxExceptions = maxExceptions;
    this.total = total;
  }
}

/** The `{type, message, traceback}` a failed rollout is kept as in `TrajectoryGroup.exceptions`. */
export function toTrajectoryException(error: unknown): TrajectoryException {
  if (error instanceof Error) {
    return {
      type: error.name || 'Error',
      message: error.message,
      traceback: error.stack ?? `${error.name}: ${error.message}`,
    };
  }
  return { type: typeof error, message: String(error), traceback: '' };
}

/** How much of stderr an {@link AgentProcessError}'s message quotes. */
const STDERR_TAIL_CHARS = 2000;

/**
 * An agent process started by `context.endpoint.spawn()` did not exit with code 0: it exited with
 * another code, was killed by a signal, outlived its `timeout`, or could not be started (`cause`
 * holds the system error). The message names the command, the code or signal and the tail of its
 * stderr. Retryable: a rollout that throws it fails and is retried while the gather's `maxRetries`
 * allow, and counts against `maxExceptions` otherwise.
 * @example
 * try {
 *   await context.endpoint.spawn('python', ['agent.py']);
 * } catch (error) {
 *   if (error instanceof AgentProcessError) console.log(error.exitCode, error.stderr);
 *   throw error;
 * }
 */
export class AgentProcessError extends PolicyloopError {
  /** The command, as given. */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** The exit code, or null when a signal ended it or it never started. */
  readonly exitCode: number | null;
  /** The signal that ended it (`SIGKILL`, ...), or null. */
  readonly signal: NodeJS.Signals | null;
  /** Everything it printed on stdout. */
  readonly stdout: string;
  /** Everything it printed on stderr. */
  readonly stderr: string;

  constructor(details: {
    command: string;
    args: readonly string[];
    exitCode: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
    reason?: string | undefined;
    cause?: unknown;
  }) {
    const { command, args, exitCode, signal, stdout, stderr } = details;
    const shown = [command, ...args].join(' ');
    const how =
      details.reason ?? (signal !== null ? `was killed by ${signal}` : `exited with code ${String(exitCode)}`);
    const tail = stderr.length > STDERR_TAIL_CHARS ? `…${stderr.slice(-STDERR_TAIL_CHARS)}` : stderr;
    const quoted = tail.trim() === '' ? ' (nothing on stderr)' : `; stderr:\n${tail}`;
    super(
      `Agent process \`${shown}\` ${how}${quoted}`,
      'cause' in details ? { cause: details.cause, retryable: true } : { retryable: true },
    );
    this.command = command;
    this.args = args;
    this.exitCode = exitCode;
    this.signal = signal;
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

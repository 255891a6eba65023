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

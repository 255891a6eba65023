/** The root of every error policyloop throws, and the errors every layer may throw. */
import type { z } from 'zod';
import { abortReason } from './delay.js';
import { formatIssues } from './format-issues.js';

/** Options of {@link PolicyloopError}: the underlying cause and whether trying again may help. */
export interface PolicyloopErrorOptions {
  /** The error (or value) that led to this one; kept as `error.cause`. */
  cause?: unknown;
  /**
   * Whether the same call may succeed if tried again unchanged.
   * @default false
   */
  retryable?: boolean | undefined;
}

/**
 * Root of every error policyloop throws, so `catch (error) { if (error instanceof PolicyloopError) ... }`
 * separates ours from everything else. `name` is the concrete class name, `cause` is always kept,
 * and `retryable` says whether trying the same call again may help.
 * @example
 * try {
 *   await client.jobs.retrieve(jobId);
 * } catch (error) {
 *   if (error instanceof PolicyloopError && error.retryable) scheduleRetry();
 *   else throw error;
 * }
 */
export class PolicyloopError extends Error {
  /** Whether the same call may succeed if tried again unchanged. */
  readonly retryable: boolean;

  /**
   * @param message What was expected and what came.
   * @param options The `cause` and whether the call is `retryable`.
   */
  constructor(message: string, options: PolicyloopErrorOptions = {}) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    // `new.target` is the concrete subclass, so every error names itself without boilerplate.
    this.name = new.target.name;
    this.retryable = options.retryable ?? false;
  }
}

/**
 * Statuses worth retrying unchanged: request timeout, conflict (often a lock), rate limit,
 * server errors. The one statement of the status rule; {@link isRetryableError} applies it.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * Whether a failed call may succeed if tried again unchanged: the one retry rule of the client's
 * requests, the log batcher, the gather's rollouts and the judge. An error that says so
 * (`retryable`, as every {@link PolicyloopError} does) is taken at its word; an error with an HTTP
 * error `status` (another SDK's `APIError`) is judged by {@link isRetryableStatus}; anything else
 * gets `otherwise` (the gather retries a rollout's own exceptions; the judge does not).
 * @example
 * if (attempt <= maxRetries && isRetryableError(error)) await delay(backoffDelay(attempt, retryDelay), signal);
 */
export function isRetryableError(error: unknown, otherwise = false): boolean {
  const { retryable, status } = (error ?? {}) as { retryable?: unknown; status?: unknown };
  if (typeof retryable === 'boolean') return retryable;
  if (typeof status === 'number' && status >= 400) return isRetryableStatus(status);
  return otherwise;
}

/**
 * A bad argument or option, caught before anything was sent or started. `argument` names what was
 * wrong (`timeout`, `options.maxRetries`, `body`...); the message says what was expected and what
 * came ("Expected `timeout` to be a positive number of milliseconds, got -1"). When zod checked
 * the value, its issues are kept as data in `issues`.
 * @example
 * try {
 *   await gatherTrajectoryGroups(scenarios, rollout, { groupSize: 0 });
 * } catch (error) {
 *   if (error instanceof InvalidArgumentError) console.log(error.argument); // 'groupSize'
 * }
 */
export class InvalidArgumentError extends PolicyloopError {
  /** What was wrong: `body`, `query`, `modelId`, `options.timeout`, `groupSize`... */
  readonly argument: string;
  /** The zod issues, when zod checked the value (empty otherwise). */
  readonly issues: z.core.$ZodIssue[];

  /**
   * @param argument What was wrong, e.g. `body` or `options.timeout`.
   * @param detail The whole message ("Expected `x` to be ..., got ..."), or the zod issues.
   * @param options With issues, the operation (`context`, e.g. `POST /preview/training-jobs`) for
   *   the message; with a message, the zod `issues` behind it; the `cause` to keep.
   */
  constructor(
    argument: string,
    detail: string | z.core.$ZodIssue[],
    options: { context?: string | undefined; cause?: unknown; issues?: z.core.$ZodIssue[] | undefined } = {},
  ) {
    const { context } = options;
    super(
      typeof detail === 'string'
        ? detail
        : `Invalid ${argument}${context === undefined ? '' : ` for ${context}`}: ${formatIssues(detail)}`,
      'cause' in options ? { cause: options.cause } : {},
    );
    this.argument = argument;
    this.issues = typeof detail === 'string' ? (options.issues ?? []) : detail;
  }
}

/**
 * The caller's `signal` aborted the call: during an HTTP request, a wait between retries, a job
 * poll, a gather, a log flush or a judge request. Every user abort rejects with this one class
 * (the name is openai-node's); `cause` is the signal's `reason`. A timeout is never this error.
 * Not retryable.
 * @example
 * try {
 *   await model.train(groups, {}, { signal: AbortSignal.timeout(60_000) });
 * } catch (error) {
 *   if (error instanceof APIUserAbortError) console.log('stopped:', error.cause);
 * }
 */
export class APIUserAbortError extends PolicyloopError {
  /** @param options The signal's reason as `cause`, and an optional message. */
  constructor(options: { cause?: unknown; message?: string | undefined } = {}) {
    super(options.message ?? 'Request was aborted.', { cause: options.cause });
  }
}

/**
 * The abort error of `signal`: an {@link APIUserAbortError} whose `cause` is the signal's reason
 * (a standard `AbortError` when it carries none). `what` names what was aborted in the message.
 */
export function userAbortError(signal: AbortSignal | undefined, what = 'The operation'): APIUserAbortError {
  return new APIUserAbortError({ cause: abortReason(signal), message: `${what} was aborted.` });
}

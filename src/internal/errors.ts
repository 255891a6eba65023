/** The root of every error policyloop throws. */

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
 * server errors. The one statement of the rule: the client's retries, the gather's rollout
 * retries and the judge all ask it.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

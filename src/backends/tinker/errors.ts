/** The errors of the Tinker client, in policyloop's one error tree. */
import { PolicyloopError } from '../../internal/errors.js';

/**
 * A Tinker request was accepted but its future ended in failure: the server's `{error, category}`
 * (hosted Tinker) or a 400 `{detail}` from `retrieve_future` (SkyRL). `message` carries the
 * server's text; `category` is Tinker's (`user`, `server`, `unknown`) when the server gave one.
 * @example
 * try {
 *   await model.train(groups);
 * } catch (error) {
 *   if (error instanceof TinkerRequestFailedError) console.log(error.operation, error.category);
 * }
 */
export class TinkerRequestFailedError extends PolicyloopError {
  /** The Tinker operation, e.g. `forward_backward`. */
  readonly operation: string;
  /** Tinker's error category, when the server gave one. */
  readonly category: string | undefined;
  /** The future's id on the server. */
  readonly requestId: string;
  /** The server's text alone. */
  readonly serverMessage: string;
  /** The HTTP status the failure came with (SkyRL's 400), when it came as one. */
  readonly status: number | undefined;

  /**
   * @param operation The Tinker operation.
   * @param requestId The future's id.
   * @param serverMessage The server's text.
   * @param category Tinker's category, when given.
   * @param status The HTTP status of the failure, when it came as one.
   */
  constructor(operation: string, requestId: string, serverMessage: string, category?: string, status?: number) {
    super(
      `Tinker ${operation} failed on the server: ${serverMessage}${category ? ` (category ${category})` : ''} [request ${requestId}]`,
      { retryable: category === 'server' },
    );
    this.operation = operation;
    this.category = category;
    this.requestId = requestId;
    this.serverMessage = serverMessage;
    this.status = status;
  }

  /**
   * Whether the server refused the request for what it asked (Tinker's category `user`, or a
   * 4xx such as SkyRL's 400 for a handled error), not for a fault of its own.
   */
  get refusedRequest(): boolean {
    return this.category === 'user' || (this.status !== undefined && this.status >= 400 && this.status < 500);
  }
}

/**
 * A Tinker future gave no result within the client's `futureTimeout`: the server is stuck,
 * overloaded or lost the request. Retryable.
 */
export class TinkerFutureTimeoutError extends PolicyloopError {
  /** The Tinker operation, e.g. `optim_step`. */
  readonly operation: string;
  /** The future's id on the server. */
  readonly requestId: string;

  /**
   * @param operation The Tinker operation.
   * @param requestId The future's id.
   * @param timeout The time allowed, in milliseconds.
   */
  constructor(operation: string, requestId: string, timeout: number) {
    super(
      `Tinker ${operation} gave no result within ${timeout} ms (the TinkerBackend's futureTimeout) [request ${requestId}]: the server is stuck or lost the request; raise futureTimeout for slow servers.`,
      { retryable: true },
    );
    this.operation = operation;
    this.requestId = requestId;
  }
}

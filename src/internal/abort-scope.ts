/**
 * One wait bounded by the caller's `signal` and a `timeout`, and the one rule of which error ends
 * it: the caller's abort rejects with `APIUserAbortError` (cause: the signal's reason), the timeout
 * with the waiter's own timeout error. Never the other way round.
 */
import { abortReason } from './delay.js';
import { userAbortError } from './errors.js';

/** What {@link abortScope} needs. */
export interface AbortScopeOptions {
  /** The caller's signal. */
  signal?: AbortSignal | undefined;
  /** Time allowed, in milliseconds; `undefined` or `Infinity` for none. */
  timeout?: number | undefined;
  /** Names what was aborted, for the message: `The flush`. */
  what: string;
  /** The error of the timeout (e.g. `new TrainingTimeoutError(jobId, timeout)`). */
  onTimeout: (timeout: number) => Error;
}

/** A running {@link abortScope}. */
export interface AbortScope {
  /** Aborts when the caller's signal aborts (with its reason) or the timeout passes (with its error). */
  readonly signal: AbortSignal;
  /** Whether the timeout ended the scope. */
  readonly timedOut: boolean;
  /** The error to reject with once `signal` aborted: the timeout's, or `APIUserAbortError`. */
  error(): Error;
  /** Clears the timer and the listener; call in `finally`. */
  dispose(): void;
}

/**
 * Starts a scope: pass `scope.signal` to the work, and once it aborts reject with `scope.error()`.
 * The timer is a plain `setTimeout`, so fake timers drive it.
 * @example
 * const scope = abortScope({ signal, timeout, what: 'The flush', onTimeout: (ms) => new LogFlushTimeoutError(ms) });
 * try {
 *   await raceSignal(work(), scope.signal);
 * } catch (error) {
 *   throw scope.signal.aborted ? scope.error() : error;
 * } finally {
 *   scope.dispose();
 * }
 */
export function abortScope(options: AbortScopeOptions): AbortScope {
  const { signal, timeout, what, onTimeout } = options;
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = (): void => controller.abort(abortReason(signal));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const timer =
    timeout !== undefined && Number.isFinite(timeout) && !controller.signal.aborted
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(onTimeout(timeout));
        }, timeout)
      : undefined;
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    error() {
      return timedOut ? (controller.signal.reason as Error) : userAbortError(signal, what);
    },
    dispose() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** An abortable sleep. */

/** The longest delay one timer holds (2^31 - 1 ms); a longer one would fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves after `ms` milliseconds, or rejects at once with the signal's reason when `signal`
 * aborts (also when it is already aborted). Used for every wait between retries, so that a
 * cancelled call never sits out a backoff. Waits longer than a timer holds (about 24.8 days,
 * `Infinity` included) are chained rather than firing at once.
 * @example
 * await delay(500, AbortSignal.timeout(10_000));
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const wait = (remaining: number): void => {
      timer = setTimeout(
        () => {
          if (remaining > MAX_TIMER_MS) {
            wait(remaining - MAX_TIMER_MS);
            return;
          }
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.min(remaining, MAX_TIMER_MS),
      );
    };
    wait(Number.isNaN(ms) ? 0 : Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The reason a signal aborted, or a standard `AbortError` when it carries none. */
export function abortReason(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/**
 * Settles like `promise`, or rejects at once with the signal's reason when `signal` aborts first
 * (also when it is already aborted). The promise itself is not cancelled: use this to stop
 * *waiting* for work that cannot take a signal.
 * @example
 * await raceSignal(queue.onIdle(), options.signal);
 */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) {
    // The losing promise may still reject later (a request that sees the same abort): nobody
    // awaits it any more, so observe it here instead of leaving an unhandled rejection.
    promise.catch(() => {});
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Whether `value` is a promise or another thenable (what `await` would wait for). */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

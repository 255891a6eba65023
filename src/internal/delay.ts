/** An abortable sleep. */

/**
 * Resolves after `ms` milliseconds, or rejects at once with the signal's reason when `signal`
 * aborts (also when it is already aborted). Used for every wait between retries, so that a
 * cancelled call never sits out a backoff.
 * @example
 * await delay(500, AbortSignal.timeout(10_000));
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
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
  if (signal.aborted) return Promise.reject(abortReason(signal));
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

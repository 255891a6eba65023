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

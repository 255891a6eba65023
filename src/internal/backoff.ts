/** The one backoff rule of every retry loop (client, log batcher, gather, judge). */

/** Longest backoff step, in milliseconds, unless the first step is already longer. */
export const MAX_BACKOFF_MS = 8_000;

/**
 * Milliseconds to wait before retry number `retry` (1 for the first retry): `retryDelay` doubled
 * for each further retry, capped at 8 s (or at `retryDelay` when that is longer), minus up to
 * 25 % jitter so that many callers do not retry in lockstep.
 * @example
 * await delay(backoffDelay(attempt, options.retryDelay), signal);
 */
export function backoffDelay(retry: number, retryDelay: number, random: () => number = Math.random): number {
  const base = Math.min(retryDelay * 2 ** Math.max(0, retry - 1), Math.max(MAX_BACKOFF_MS, retryDelay));
  return base * (1 - random() * 0.25);
}

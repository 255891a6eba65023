/** How long to wait before the next attempt. */
import { backoffDelay } from '../internal/backoff.js';

/** First backoff step, in milliseconds: the default `retryDelay` of the client and the log batcher. */
export const INITIAL_RETRY_DELAY_MS = 500;
/** Longest server-requested wait the client honours; longer hints fall back to backoff. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * Milliseconds to wait before retry number `retry` (1 for the first retry). A server hint wins:
 * `retry-after-ms`, else `Retry-After` in seconds or as an HTTP date, when it is between 0 and
 * 60 s. Otherwise exponential backoff from `initial` (see `backoffDelay`): 0.5 s * 2^(retry-1) by
 * default, capped at 8 s, minus up to 25 % jitter so that many clients do not retry in lockstep.
 */
export function retryDelay(
  retry: number,
  headers: Headers | undefined,
  initial: number = INITIAL_RETRY_DELAY_MS,
  random: () => number = Math.random,
): number {
  const hinted = serverRetryHint(headers);
  if (hinted !== undefined) return hinted;
  return backoffDelay(retry, initial, random);
}

/** The wait the server asked for, in ms, when it asked for a sane one. */
function serverRetryHint(headers: Headers | undefined): number | undefined {
  if (headers === undefined) return undefined;
  const candidates: number[] = [];
  const milliseconds = headers.get('retry-after-ms');
  if (milliseconds !== null && milliseconds.trim() !== '') candidates.push(Number(milliseconds));
  const retryAfter = headers.get('retry-after');
  if (retryAfter !== null && retryAfter.trim() !== '') {
    const seconds = Number(retryAfter);
    candidates.push(Number.isNaN(seconds) ? Date.parse(retryAfter) - Date.now() : seconds * 1000);
  }
  return candidates.find((ms) => Number.isFinite(ms) && ms >= 0 && ms <= MAX_RETRY_AFTER_MS);
}

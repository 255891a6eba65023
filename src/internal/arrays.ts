/**
 * Array helpers for arrays of any length. `target.push(...items)` and `Math.max(...values)` pass
 * every element as a call argument, and a call has room for only about a hundred thousand: a
 * longer array (a long message's tokens, a million logged values) throws `RangeError: Maximum call
 * stack size exceeded`. These loop instead.
 */

/**
 * Appends every item of `items` to `target` (what `target.push(...items)` does, for any length).
 * @example
 * pushAll(tokens, tokenizer.encodeText(text));
 */
export function pushAll<T>(target: T[], items: Iterable<T>): T[] {
  for (const item of items) target.push(item);
  return target;
}

/**
 * The largest of `start` and `values` (`Math.max(start, ...values)` for any length).
 * @example
 * maxOf(rows.map((row) => row.length), 0);
 */
export function maxOf(values: Iterable<number>, start = Number.NEGATIVE_INFINITY): number {
  let largest = start;
  for (const value of values) largest = Math.max(largest, value);
  return largest;
}

/**
 * The smallest of `start` and `values` (`Math.min(start, ...values)` for any length).
 * @example
 * minOf(steps);
 */
export function minOf(values: Iterable<number>, start = Number.POSITIVE_INFINITY): number {
  let smallest = start;
  for (const value of values) smallest = Math.min(smallest, value);
  return smallest;
}

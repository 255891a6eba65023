/**
 * The old one-value checks, kept only while the training core still calls them (rl-trainer,
 * trainable-model, prompted-model): each is now a one-line parse with a field schema of
 * `option-schema.ts`, with the same messages. New code declares its options with
 * {@link optionsSchema} instead; delete this file with its last use.
 */
import {
  type IntegerBounds,
  invalidOption,
  type NumberBounds,
  option,
  optionsSchema,
  parseValue,
} from './option-schema.js';

export { MAX_TIMER_MS } from './delay.js';
export { type IntegerBounds, invalidOption, type NumberBounds, optionsSchema };

/** An integer between `min` and `max` (inclusive). */
export function integerOption(name: string, value: unknown, bounds: IntegerBounds = {}): number {
  return parseValue(name, option.integer(bounds), value);
}

/** A number: finite (or `Infinity` when allowed), not NaN, within the bounds. */
export function numberOption(name: string, value: unknown, bounds: NumberBounds = {}): number {
  return parseValue(name, option.number(bounds), value);
}

/** A time limit or wait in milliseconds, or `Infinity` for none when `allowInfinity`. */
export function timeoutOption(name: string, value: unknown, allowInfinity = false): number {
  return parseValue(name, option.timeout({ allowInfinity }), value);
}

/** A retry count: an integer >= 0. */
export function maxRetriesOption(name: string, value: unknown): number {
  return parseValue(name, option.retryCount(), value);
}

/** A wait before a retry, in milliseconds: >= 0 and at most what a timer holds. */
export function retryDelayOption(name: string, value: unknown): number {
  return parseValue(name, option.retryDelay(), value);
}

/** One of `values`. */
export function enumOption<const Value extends string | number | boolean>(
  name: string,
  value: unknown,
  values: readonly Value[],
): Value {
  return parseValue(name, option.oneOf(values as [Value, ...Value[]]), value) as Value;
}

/** A boolean. */
export function booleanOption(name: string, value: unknown): boolean {
  return parseValue(name, option.boolean(), value);
}

/** A string; `nonEmpty` also refuses `''` and whitespace. */
export function stringOption(name: string, value: unknown, nonEmpty = false): string {
  return parseValue(name, nonEmpty ? option.nonEmptyString() : option.string(), value);
}

/** A function. */
// biome-ignore lint/complexity/noBannedTypes: any function is accepted; the caller narrows the type
export function functionOption<Fn extends Function>(name: string, value: unknown): Fn {
  return parseValue(name, option.function<Fn>(), value);
}

/** An `AbortSignal`. */
export function signalOption(name: string, value: unknown): AbortSignal {
  return parseValue(name, option.signal(), value);
}

/** Runs `check` only when `value` is not `undefined` (an option left out). */
export function optional<T>(value: unknown, check: (value: unknown) => T): T | undefined {
  return value === undefined ? undefined : check(value);
}

/** An options argument: `undefined` (none given) or an object, not an array, a primitive or an `AbortSignal`. */
export function optionsObject<T extends object>(name: string, value: T | undefined): T | Record<string, never> {
  if (value === undefined) return {};
  return parseValue(name, option.options<T>(), value);
}

/**
 * The one validator of options: every public method checks its options here before it sends or
 * starts anything, and a bad value throws {@link InvalidArgumentError} with one kind of message:
 * "Expected `timeout` to be a positive number of milliseconds, got -1".
 *
 * Each check takes the option's name (as the caller spelled it), the value, and returns the value
 * typed. `undefined` is never accepted here: apply the default first (`options.x ?? DEFAULT`), or
 * use {@link optional}.
 */
import { MAX_TIMER_MS } from './delay.js';
import { describeValue } from './describe-value.js';
import { InvalidArgumentError } from './errors.js';

export { MAX_TIMER_MS } from './delay.js';

/** Throws the one error of a bad option: "Expected `name` to be <expected>, got <value>". */
export function invalidOption(name: string, value: unknown, expected: string): InvalidArgumentError {
  return new InvalidArgumentError(name, `Expected \`${name}\` to be ${expected}, got ${describeValue(value)}`);
}

/** Bounds of {@link integerOption}. */
export interface IntegerBounds {
  /** The smallest value allowed. */
  min?: number | undefined;
  /** The largest value allowed. */
  max?: number | undefined;
}

/**
 * An integer between `min` and `max` (inclusive).
 * @example
 * const groupSize = integerOption('groupSize', options.groupSize ?? 1, { min: 1 });
 */
export function integerOption(name: string, value: unknown, bounds: IntegerBounds = {}): number {
  const { min, max } = bounds;
  if (
    typeof value === 'number' &&
    Number.isInteger(value) &&
    (min === undefined || value >= min) &&
    (max === undefined || value <= max)
  ) {
    return value;
  }
  let expected = 'an integer';
  if (min !== undefined && max !== undefined) expected = `an integer from ${min} to ${max}`;
  else if (min === 0) expected = 'a non-negative integer';
  else if (min !== undefined) expected = `an integer >= ${min}`;
  else if (max !== undefined) expected = `an integer <= ${max}`;
  throw invalidOption(name, value, expected);
}

/** What {@link numberOption} accepts besides finite numbers in range. */
export interface NumberBounds {
  /** The smallest value allowed (inclusive). */
  min?: number | undefined;
  /** Whether `min` itself is excluded (`> min` rather than `>= min`). */
  exclusiveMin?: boolean | undefined;
  /** The largest finite value allowed (inclusive). */
  max?: number | undefined;
  /** Whether `Infinity` is allowed (e.g. "no limit"). */
  allowInfinity?: boolean | undefined;
  /** The unit, for the message: `milliseconds`. */
  unit?: string | undefined;
}

/**
 * A number: finite (or `Infinity` when allowed), not NaN, within the bounds.
 * @example
 * numberOption('retryDelay', options.retryDelay ?? 1000, { min: 0, unit: 'milliseconds' });
 */
export function numberOption(name: string, value: unknown, bounds: NumberBounds = {}): number {
  const { min, max, exclusiveMin = false, allowInfinity = false, unit } = bounds;
  const ok =
    typeof value === 'number' &&
    !Number.isNaN(value) &&
    (Number.isFinite(value) ? max === undefined || value <= max : allowInfinity && value > 0) &&
    (min === undefined || (exclusiveMin ? value > min : value >= min));
  if (ok) return value;
  const of = unit === undefined ? 'number' : `number of ${unit}`;
  let expected: string;
  if (min === 0 && exclusiveMin) expected = `a positive ${of}`;
  else if (min === 0) expected = `a non-negative ${of}`;
  else if (min !== undefined) expected = `a ${of} ${exclusiveMin ? '>' : '>='} ${min}`;
  else expected = `a finite ${of}`;
  if (max !== undefined) expected += `, at most ${max}`;
  if (allowInfinity) expected += ' (or Infinity)';
  throw invalidOption(name, value, expected);
}

/**
 * A time limit or wait in milliseconds: positive, at most what a timer holds (about 24.8 days),
 * or `Infinity` for none when `allowInfinity`.
 * @example
 * const timeout = timeoutOption('timeout', options.timeout ?? 60_000);
 */
export function timeoutOption(name: string, value: unknown, allowInfinity = false): number {
  return numberOption(name, value, {
    min: 0,
    exclusiveMin: true,
    max: MAX_TIMER_MS,
    allowInfinity,
    unit: 'milliseconds',
  });
}

/** A retry count: an integer >= 0. */
export function maxRetriesOption(name: string, value: unknown): number {
  return integerOption(name, value, { min: 0 });
}

/** A wait before a retry, in milliseconds: >= 0 and at most what a timer holds. */
export function retryDelayOption(name: string, value: unknown): number {
  return numberOption(name, value, { min: 0, max: MAX_TIMER_MS, unit: 'milliseconds' });
}

/**
 * One of `values`.
 * @example
 * enumOption('lossFn', options.lossFn, ['cispo', 'ppo']);
 */
export function enumOption<const Value extends string | number | boolean>(
  name: string,
  value: unknown,
  values: readonly Value[],
): Value {
  if (values.includes(value as Value)) return value as Value;
  throw invalidOption(name, value, `one of ${values.map((item) => JSON.stringify(item)).join(', ')}`);
}

/** A boolean. */
export function booleanOption(name: string, value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  throw invalidOption(name, value, 'true or false');
}

/** A string; `nonEmpty` also refuses `''` and whitespace. */
export function stringOption(name: string, value: unknown, nonEmpty = false): string {
  if (typeof value === 'string' && (!nonEmpty || value.trim() !== '')) return value;
  throw invalidOption(name, value, nonEmpty ? 'a non-empty string' : 'a string');
}

/** A function. */
// biome-ignore lint/complexity/noBannedTypes: any function is accepted; the caller narrows the type
export function functionOption<Fn extends Function>(name: string, value: unknown): Fn {
  if (typeof value === 'function') return value as Fn;
  throw invalidOption(name, value, 'a function');
}

/** An `AbortSignal` (from an `AbortController`, `AbortSignal.timeout(...)`...). */
export function signalOption(name: string, value: unknown): AbortSignal {
  if (value instanceof AbortSignal) return value;
  throw invalidOption(name, value, 'an AbortSignal');
}

/**
 * Runs `check` only when `value` is not `undefined` (an option left out).
 * @example
 * const signal = optional(options.signal, (value) => signalOption('signal', value));
 */
export function optional<T>(value: unknown, check: (value: unknown) => T): T | undefined {
  return value === undefined ? undefined : check(value);
}

/** An options argument: `undefined` (none given) or a plain object, not an array or a primitive. */
export function optionsObject<T extends object>(name: string, value: T | undefined): T | Record<string, never> {
  if (value === undefined) return {};
  // `flush(signal)` was the old form: a signal passed where options go must not be ignored.
  if (value instanceof AbortSignal) throw invalidOption(name, value, 'an options object (pass `{ signal }`)');
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value;
  throw invalidOption(name, value, 'an options object');
}

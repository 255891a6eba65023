/**
 * The old one-value checks, kept only while the training core still calls them (rl-trainer,
 * trainable-model, prompted-model): each is now a one-line parse with a field schema of
 * `option-schema.ts`, with the same messages. New code declares its options with
 * {@link optionsSchema} instead; delete this file with its last use.
 */
import type { z } from 'zod';
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

// Making a zod schema costs far more than parsing with it: each kind is made once.
const schemas = new Map<string, z.ZodType>();

/** The schema `make` makes, made on the first call for `key` and kept. */
function cached(key: string, make: () => z.ZodType): z.ZodType {
  let schema = schemas.get(key);
  if (schema === undefined) {
    schema = make();
    schemas.set(key, schema);
  }
  return schema;
}

/** An integer between `min` and `max` (inclusive). */
export function integerOption(name: string, value: unknown, bounds: IntegerBounds = {}): number {
  return parseValue(
    name,
    cached(`integer ${bounds.min} ${bounds.max}`, () => option.integer(bounds)),
    value,
  ) as number;
}

/** A number: finite (or `Infinity` when allowed), not NaN, within the bounds. */
export function numberOption(name: string, value: unknown, bounds: NumberBounds = {}): number {
  const key = `number ${bounds.min} ${bounds.exclusiveMin} ${bounds.max} ${bounds.allowInfinity} ${bounds.unit}`;
  return parseValue(
    name,
    cached(key, () => option.number(bounds)),
    value,
  ) as number;
}

/** A time limit or wait in milliseconds, or `Infinity` for none when `allowInfinity`. */
export function timeoutOption(name: string, value: unknown, allowInfinity = false): number {
  return parseValue(
    name,
    cached(`timeout ${allowInfinity}`, () => option.timeout({ allowInfinity })),
    value,
  ) as number;
}

/** A retry count: an integer >= 0. */
export function maxRetriesOption(name: string, value: unknown): number {
  return parseValue(name, cached('retryCount', option.retryCount), value) as number;
}

/** A wait before a retry, in milliseconds: >= 0 and at most what a timer holds. */
export function retryDelayOption(name: string, value: unknown): number {
  return parseValue(name, cached('retryDelay', option.retryDelay), value) as number;
}

/** One of `values`. */
export function enumOption<const Value extends string | number | boolean>(
  name: string,
  value: unknown,
  values: readonly Value[],
): Value {
  const key = `oneOf ${JSON.stringify(values)}`;
  return parseValue(
    name,
    cached(key, () => option.oneOf(values as [Value, ...Value[]])),
    value,
  ) as Value;
}

/** A boolean. */
export function booleanOption(name: string, value: unknown): boolean {
  return parseValue(name, cached('boolean', option.boolean), value) as boolean;
}

/** A string; `nonEmpty` also refuses `''` and whitespace. */
export function stringOption(name: string, value: unknown, nonEmpty = false): string {
  return parseValue(
    name,
    nonEmpty ? cached('nonEmptyString', option.nonEmptyString) : cached('string', option.string),
    value,
  ) as string;
}

/** A function. */
// biome-ignore lint/complexity/noBannedTypes: any function is accepted; the caller narrows the type
export function functionOption<Fn extends Function>(name: string, value: unknown): Fn {
  return parseValue(name, cached('function', option.function), value) as Fn;
}

/** An `AbortSignal`. */
export function signalOption(name: string, value: unknown): AbortSignal {
  return parseValue(name, cached('signal', option.signal), value) as AbortSignal;
}

/** Runs `check` only when `value` is not `undefined` (an option left out). */
export function optional<T>(value: unknown, check: (value: unknown) => T): T | undefined {
  return value === undefined ? undefined : check(value);
}

/** An options argument: `undefined` (none given) or an object, not an array, a primitive or an `AbortSignal`. */
export function optionsObject<T extends object>(name: string, value: T | undefined): T | Record<string, never> {
  if (value === undefined) return {};
  return parseValue(name, cached('options', option.options), value) as T;
}

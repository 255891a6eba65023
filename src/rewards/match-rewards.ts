/** Built-in rewards that compare the final answer with an expected one. */
import type { RunReadOptions, Trajectory } from '../schema/index.js';
import type { RewardFn } from './reward-function.js';
import { finalAssistantText } from './trajectory-text.js';

/** An expected value: fixed, or read from the scenario. */
export type ExpectedValue<S, T> = T | ((scenario: S) => T);

function resolve<S, T>(expected: ExpectedValue<S, T>, scenario: S): T {
  return typeof expected === 'function' ? (expected as (scenario: S) => T)(scenario) : expected;
}

function named<S>(name: string, fn: (trajectory: Trajectory, scenario: S) => number): RewardFn<S> {
  Object.defineProperty(fn, 'name', { value: name });
  return fn;
}

/**
 * 1 when the run's final assistant text (see `finalAssistantText`) equals `expected` exactly
 * (surrounding whitespace ignored), else 0.
 * @example
 * exactMatch<{ answer: string }>((scenario) => scenario.answer)
 */
export function exactMatch<S = unknown>(expected: ExpectedValue<S, string>, options: RunReadOptions = {}): RewardFn<S> {
  return named('exactMatch', (trajectory, scenario) =>
    finalAssistantText(trajectory, options).trim() === resolve(expected, scenario).trim() ? 1 : 0,
  );
}

/** Options of {@link normalizedMatch} and {@link normalizeAnswer}. */
export interface NormalizeOptions extends RunReadOptions {
  /**
   * Compare letter case too.
   * @default false
   */
  caseSensitive?: boolean | undefined;
}

/**
 * The comparable form of an answer: Unicode NFKC, whitespace collapsed and trimmed, surrounding
 * quotes/backticks and a final `.`, `!` or `?` removed, lower-cased unless `caseSensitive`.
 * @example
 * normalizeAnswer('  "Paris."  ') // 'paris'
 */
export function normalizeAnswer(text: string, options: NormalizeOptions = {}): string {
  let result = text.normalize('NFKC').replace(/\s+/g, ' ').trim();
  result = result.replace(/^["'`]+|["'`]+$/g, '').trim();
  result = result.replace(/[.!?]+$/, '').trim();
  return options.caseSensitive === true ? result : result.toLowerCase();
}

/**
 * 1 when the final assistant text equals `expected` after {@link normalizeAnswer}, else 0.
 * @example
 * normalizedMatch('Paris') // scores "paris." and " PARIS " as 1
 */
export function normalizedMatch<S = unknown>(
  expected: ExpectedValue<S, string>,
  options: NormalizeOptions = {},
): RewardFn<S> {
  return named('normalizedMatch', (trajectory, scenario) =>
    normalizeAnswer(finalAssistantText(trajectory, options), options) ===
    normalizeAnswer(resolve(expected, scenario), options)
      ? 1
      : 0,
  );
}

/**
 * 1 when `pattern` matches the run's final assistant text, else 0. A string is compiled with `new RegExp`.
 * @example
 * regexMatch(/^\d+$/) // the answer is a number
 */
export function regexMatch<S = unknown>(
  pattern: ExpectedValue<S, RegExp | string>,
  options: RunReadOptions = {},
): RewardFn<S> {
  return named('regexMatch', (trajectory, scenario) => {
    const resolved = resolve(pattern, scenario);
    const regex =
      typeof resolved === 'string'
        ? new RegExp(resolved)
        : new RegExp(resolved.source, resolved.flags.replace('g', ''));
    return regex.test(finalAssistantText(trajectory, options)) ? 1 : 0;
  });
}

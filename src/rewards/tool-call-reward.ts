/** Built-in reward: the model called a tool, optionally with given arguments. */
import type { RunReadOptions } from '../schema/index.js';
import type { RewardFn } from './reward-function.js';
import { toolCallsOf } from './trajectory-text.js';

/** Expected arguments: a subset the call's parsed arguments must contain, or a test of them. */
export type ExpectedArguments<S> = Readonly<Record<string, unknown>> | ((args: unknown, scenario: S) => boolean);

/** True when `actual` contains `expected`: equal primitives, arrays equal item by item, objects with at least its keys. */
export function containsValue(actual: unknown, expected: unknown): boolean {
  if (expected === null || typeof expected !== 'object') return Object.is(actual, expected);
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    return expected.every((item, index) => containsValue(actual[index], item));
  }
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
  const record = actual as Record<string, unknown>;
  return Object.entries(expected).every(([key, value]) => key in record && containsValue(record[key], value));
}

/**
 * 1 when some Choice of the run (a sub-agent's too; `mainOnly`: the main conversation's) called tool `name` (with arguments containing `args`, or
 * passing the `args` test, when given), else 0.
 * @example
 * toolCalledWith('get_weather', { city: 'Paris' })
 * toolCalledWith<{ city: string }>('get_weather', (args, scenario) => (args as { city?: string }).city === scenario.city)
 */
export function toolCalledWith<S = unknown>(
  name: string,
  args?: ExpectedArguments<S>,
  options: RunReadOptions = {},
): RewardFn<S> {
  const reward: RewardFn<S> = (trajectory, scenario) => {
    const matches = toolCallsOf(trajectory, options).some((call) => {
      if (call.name !== name) return false;
      if (args === undefined) return true;
      return typeof args === 'function' ? args(call.arguments, scenario) : containsValue(call.arguments, args);
    });
    return matches ? 1 : 0;
  };
  Object.defineProperty(reward, 'name', { value: 'toolCalledWith' });
  return reward;
}

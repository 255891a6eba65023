/** The reward function type and how one is evaluated. */
import type { Trajectory } from '../schema/index.js';
import { isPromiseLike } from '../internal/delay.js';
import { describeValue } from '../internal/describe-value.js';
import { RewardFunctionError } from './reward-errors.js';

/**
 * Scores one finished trajectory of `scenario`: higher is better. Sync or async. May also write
 * `trajectory.metrics` or `trajectory.logs`. Throwing marks the rollout failed.
 * @example
 * const correct: RewardFn<{ answer: string }> = (trajectory, scenario) =>
 *   finalAssistantText(trajectory).trim() === scenario.answer ? 1 : 0;
 */
export type RewardFn<S = unknown> = (trajectory: Trajectory, scenario: S) => number | Promise<number>;

/** A reward function with its weight in a sum (see `combineRewards`). */
export interface WeightedReward<S = unknown> {
  /** The function. */
  fn: RewardFn<S>;
  /**
   * Its weight in the sum; 0 records the value as a metric without changing the reward.
   * @default 1
   */
  weight?: number | undefined;
}

/**
 * Runs `fn` and checks what it returns: any throw, or a value that is not a finite number, becomes
 * a {@link RewardFunctionError} naming `name` (the function's own name when not given).
 * @example
 * trajectory.reward = await evaluateReward(correct, trajectory, scenario);
 */
export async function evaluateReward<S>(
  fn: RewardFn<S>,
  trajectory: Trajectory,
  scenario: S,
  name?: string,
): Promise<number> {
  return await evaluateRewardNow(fn, trajectory, scenario, name);
}

/**
 * {@link evaluateReward}, answering at once (without a trip through the microtask queue) when `fn`
 * does: the runner calls it once per rollout. Throws what `evaluateReward` rejects with.
 */
export function evaluateRewardNow<S>(
  fn: RewardFn<S>,
  trajectory: Trajectory,
  scenario: S,
  name?: string,
): number | Promise<number> {
  // Runs once per rollout: the synchronous path builds no closure and no name string.
  let value: unknown;
  try {
    value = fn(trajectory, scenario);
  } catch (error) {
    return rewardThrew(rewardName(fn, name), error);
  }
  if (isPromiseLike(value)) {
    return Promise.resolve(value).then(
      (settled) => checkedReward(rewardName(fn, name), settled),
      (error: unknown) => rewardThrew(rewardName(fn, name), error),
    );
  }
  return typeof value === 'number' && Number.isFinite(value) ? value : checkedReward(rewardName(fn, name), value);
}

/** The name a reward error gives: `name`, else the function's own, else `reward`. */
function rewardName(fn: { readonly name: string }, name: string | undefined): string {
  return name ?? (fn.name !== '' ? fn.name : 'reward');
}

/** `value` when it is a finite number, else a {@link RewardFunctionError} saying what came. */
function checkedReward(rewardName: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    // A string is called one, so that `"0.5"` is not read as a number.
    const kind = typeof value === 'string' ? 'the string ' : '';
    throw new RewardFunctionError(rewardName, `returned ${kind}${describeValue(value)}; expected a finite number`, {
      value,
    });
  }
  return value;
}

/** What a throwing reward function becomes: its own `RewardFunctionError`, or one that keeps the error as `cause`. */
function rewardThrew(rewardName: string, error: unknown): never {
  if (error instanceof RewardFunctionError) throw error;
  const message = error instanceof Error ? error.message : String(error);
  throw new RewardFunctionError(rewardName, `threw: ${message}`, { cause: error });
}

/** Weighted sums of named rewards. */
import { z } from 'zod';
import type { Trajectory } from '../schema/index.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { evaluateReward, type RewardFn, type WeightedReward } from './reward-function.js';

/** Named rewards: each a function (weight 1) or `{ fn, weight }`. */
export type RewardSet<S = unknown> = Readonly<Record<string, RewardFn<S> | WeightedReward<S>>>;

/** The check of a {@link RewardSet}: each entry becomes `{ fn, weight }`, and there is at least one. */
const RewardSetSchema = z
  .record(
    z.string(),
    z.preprocess(
      (entry, context) => {
        if (typeof entry === 'function') return { fn: entry };
        if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
          context.issues.push({ code: 'custom', message: 'a function or { fn, weight }', input: entry });
        }
        return entry;
      },
      optionsSchema<WeightedReward<unknown>>()({
        fn: option.function<RewardFn<unknown>>(),
        weight: option.number().default(1),
      }),
    ),
  )
  .refine((rewards) => Object.keys(rewards).length > 0, { error: 'at least one named reward' });

/**
 * One reward function from several named ones: the reward is the weighted sum, and every named
 * value is recorded in `trajectory.metrics[name]` (weight 0 = a logged metric only). The parts run
 * one after the other, in key order; the first that fails fails the whole with its name.
 * Bad weights fail here, before any rollout runs.
 * @example
 * const reward = combineRewards<Scenario>({
 *   correct: { fn: exactMatch((scenario) => scenario.answer), weight: 1 },
 *   brevity: { fn: lengthPenalty({ target: 200 }), weight: 0.1 },
 *   json: { fn: validJson(), weight: 0 }, // metric only
 * });
 */
export function combineRewards<S = unknown>(rewards: RewardSet<S>): RewardFn<S> {
  const parsed = parseOptions(RewardSetSchema, rewards, { name: 'rewards' });
  // The schema checked that each is a function; its scenario type is the caller's `S`.
  const parts = Object.entries(parsed).map(([name, { fn, weight }]) => ({ name, fn: fn as RewardFn<S>, weight }));
  const combined = async (trajectory: Trajectory, scenario: S): Promise<number> => {
    let total = 0;
    for (const { name, fn, weight } of parts) {
      const value = await evaluateReward(fn, trajectory, scenario, name);
      trajectory.metrics[name] = value;
      total += weight * value;
    }
    return total;
  };
  return combined;
}

/** A single reward function, or named ones to be combined with {@link combineRewards}. */
export type RewardSpec<S = unknown> = RewardFn<S> | RewardSet<S>;

/** The reward function a {@link RewardSpec} stands for. */
export function toRewardFn<S>(spec: RewardSpec<S>): RewardFn<S> {
  return typeof spec === 'function' ? spec : combineRewards(spec);
}

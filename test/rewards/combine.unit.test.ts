import { describe, expect, it } from 'vitest';
import { combineRewards, RewardFunctionError } from 'policyloop';
import { evaluateReward } from 'policyloop/training';
import { PolicyloopError } from 'policyloop';
import { makeTrajectory } from 'policyloop/testing';

describe('combineRewards', () => {
  it('sums weighted rewards and records each named value in trajectory.metrics', async () => {
    const reward = combineRewards<{ target: number }>({
      correct: { fn: () => 1, weight: 2 },
      brevity: { fn: async () => -0.5, weight: 0.5 },
      plain: (_trajectory, scenario) => scenario.target,
    });
    const trajectory = makeTrajectory({ answer: 'x' });
    const total = await reward(trajectory, { target: 0.25 });
    expect(total).toBe(2 * 1 + 0.5 * -0.5 + 0.25);
    expect(trajectory.metrics).toEqual({ correct: 1, brevity: -0.5, plain: 0.25 });
  });

  it('treats a zero weight as a logged metric that leaves the reward alone', async () => {
    const reward = combineRewards({ main: () => 0.75, jsonValid: { fn: () => 1, weight: 0 } });
    const trajectory = makeTrajectory();
    expect(await reward(trajectory, undefined)).toBe(0.75);
    expect(trajectory.metrics['jsonValid']).toBe(1);
  });

  it('names the failing reward in the error, with its cause', async () => {
    const cause = new Error('index out of range');
    const reward = combineRewards({
      fine: () => 1,
      parse: () => {
        throw cause;
      },
    });
    const error = await Promise.resolve(reward(makeTrajectory(), undefined)).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RewardFunctionError);
    expect(error).toMatchObject({
      rewardName: 'parse',
      message: 'Reward function `parse` threw: index out of range',
      cause,
    });
  });

  it('rejects a value that is not a finite number', async () => {
    const reward = combineRewards({ broken: () => Number.NaN });
    await expect(reward(makeTrajectory(), undefined)).rejects.toThrow(
      'Reward function `broken` returned NaN; expected a finite number',
    );
    await expect(
      evaluateReward(() => 'yes' as unknown as number, makeTrajectory(), undefined, 'judgey'),
    ).rejects.toThrow('Reward function `judgey` returned the string "yes"; expected a finite number');
  });

  it('uses the function name when a single reward throws', async () => {
    function containsAnswer(): number {
      throw new Error('boom');
    }
    await expect(evaluateReward(containsAnswer, makeTrajectory(), undefined)).rejects.toMatchObject({
      rewardName: 'containsAnswer',
    });
  });

  it('fails at construction on a bad weight, before any rollout', () => {
    expect(() => combineRewards({ a: { fn: () => 1, weight: Number.NaN } })).toThrow(PolicyloopError);
    expect(() => combineRewards({ a: { fn: () => 1, weight: Number.NaN } })).toThrow(
      'Expected `a.weight` to be a finite number, got NaN',
    );
    expect(() => combineRewards({})).toThrow('Expected `rewards` to be at least one named reward, got {}');
    expect(() => combineRewards({ a: 'exact' as never })).toThrow(
      'Expected `a` to be a function or { fn, weight }, got "exact"',
    );
    expect(() => combineRewards({ a: { fn: 'exact' as never } })).toThrow(
      'Expected `a.fn` to be a function, got "exact"',
    );
  });

  it('refuses a misspelt key of a weighted reward, naming the nearest (a weight never ignored in silence)', () => {
    expect(() => combineRewards({ brevity: { fn: () => 1, wieght: 0.1 } as never })).toThrow(
      'Unknown option `brevity.wieght`; did you mean `brevity.weight`?',
    );
  });
});

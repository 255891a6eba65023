import { describe, expect, it } from 'vitest';
import { gatherTrajectoryGroups } from 'policyloop';
import { dropStaleGroups } from 'policyloop/training';
import { makeGroup } from 'policyloop/testing';

describe('dropStaleGroups', () => {
  const groupAt = (...versions: (number | null)[]) =>
    makeGroup(
      versions.map((version) => ({ answer: 'x', initial_policy_version: version, final_policy_version: version })),
    );

  it('drops groups whose oldest trajectory is more than maxStepsOffPolicy steps behind, keeping order', () => {
    const groups = [groupAt(5, 5), groupAt(3, 5), groupAt(4), groupAt(2)];
    const { fresh, dropped } = dropStaleGroups(groups, 5, 1);
    expect(fresh).toEqual([groups[0], groups[2]]);
    expect(dropped).toEqual([groups[1], groups[3]]);
  });

  it('keeps everything with maxStepsOffPolicy Infinity and only the current step with 0', () => {
    const groups = [groupAt(5), groupAt(4)];
    expect(dropStaleGroups(groups, 5, Number.POSITIVE_INFINITY).dropped).toEqual([]);
    expect(dropStaleGroups(groups, 5, 0).fresh).toEqual([groups[0]]);
  });

  it('keeps groups whose trajectories carry no policy version', () => {
    const groups = [groupAt(null, null)];
    expect(dropStaleGroups(groups, 10, 0).fresh).toEqual(groups);
  });

  it('works on what a gather stamped while the policy moved on', async () => {
    let step = 0;
    const groups = await gatherTrajectoryGroups(
      [0, 1, 2],
      async (scenario) => {
        // Training advances the policy while later groups are still being sampled.
        step = scenario * 2;
      },
      { concurrency: 1, sampledStep: () => step },
    );
    expect(groups.map((group) => group.trajectories[0]?.initial_policy_version)).toEqual([0, 0, 2]);
    const { fresh, dropped } = dropStaleGroups(groups, 4, 2);
    expect(fresh).toEqual([groups[2]]);
    expect(dropped).toHaveLength(2);
  });

  it('rejects a negative staleness bound with a clear message', () => {
    expect(() => dropStaleGroups([], 1, -1)).toThrow(
      'Expected `maxStepsOffPolicy` to be a non-negative number of steps (or Infinity), got -1',
    );
  });
});

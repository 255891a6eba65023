/** The step metrics shared by the log route and the framework's history.jsonl. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  computeStepMetrics,
  computeStepStatistics,
  mergeStepStatistics,
  prefixMetrics,
  Trajectory,
  TrajectoryGroup,
} from 'policyloop/schema';

const groups = (input: unknown[]) => input.map((group) => TrajectoryGroup.parse(group));

describe('computeStepMetrics', () => {
  it('computes reward, std dev over groups, exception rate, metric means and counts', () => {
    const metrics = computeStepMetrics(
      groups([
        {
          trajectories: [
            { reward: 1, metrics: { solved: true, turns: 2 } },
            { reward: 3, metrics: { solved: false, turns: 4 } },
          ],
          metrics: { difficulty: 2 },
          exceptions: [{ type: 'E', message: 'm', traceback: '' }],
        },
        { trajectories: [{ reward: 2, metrics: { turns: 6 } }, { reward: 2 }], metrics: { difficulty: 4 } },
      ]),
    );
    expect(metrics).toEqual({
      solved: 0.5,
      turns: 4,
      group_difficulty: 3,
      reward: 2,
      reward_std_dev: 0.5,
      // The second group's rewards are all equal: half the groups carry no gradient.
      frac_reward_zero_std: 0.5,
      exception_rate: 1 / 5,
      'data/step_num_trajectories': 4,
      'data/step_num_groups_submitted': 2,
      'data/step_num_groups_trainable': 1,
    });
  });

  it('keeps counts and leaves out means over nothing', () => {
    expect(computeStepMetrics([])).toEqual({
      'data/step_num_trajectories': 0,
      'data/step_num_groups_submitted': 0,
      'data/step_num_groups_trainable': 0,
    });
    expect(
      computeStepMetrics(groups([{ trajectories: [], exceptions: [{ type: 'E', message: 'm', traceback: '' }] }])),
    ).toEqual({
      exception_rate: 1,
      'data/step_num_trajectories': 0,
      'data/step_num_groups_submitted': 1,
      'data/step_num_groups_trainable': 0,
    });
  });

  it('does not let a trajectory metric named reward shadow the reward', () => {
    expect(computeStepMetrics(groups([{ trajectories: [{ reward: 1, metrics: { reward: 100 } }] }]))['reward']).toBe(1);
  });

  it('stays finite for rewards near the float limit (no overflowing sums)', () => {
    const metrics = computeStepMetrics([
      { trajectories: [{ reward: 1e308 }, { reward: 1e308 }, { reward: -1e308 }].map((t) => Trajectory.parse(t)) },
    ]);
    expect(metrics['reward']).toBeCloseTo(1e308 / 3, -300);
    // Population std dev of [a, a, -a] is a * sqrt(8) / 3.
    expect((metrics['reward_std_dev'] ?? 0) / 1e308).toBeCloseTo(Math.sqrt(8) / 3, 10);
    expect(JSON.parse(JSON.stringify(metrics))).toEqual(metrics); // nothing serialises to null
  });

  it('handles a group of 200,000 trajectories', () => {
    const trajectories = Array.from({ length: 200_000 }, (_, index) => Trajectory.parse({ reward: index % 2 }));
    const metrics = computeStepMetrics([{ trajectories }]);
    expect(metrics['reward']).toBeCloseTo(0.5, 12);
    expect(metrics['reward_std_dev']).toBeCloseTo(0.5, 12);
  });

  it('prefixes every name with the split', () => {
    expect(prefixMetrics({ reward: 1, 'data/step_num_trajectories': 2 }, 'val')).toEqual({
      'val/reward': 1,
      'val/data/step_num_trajectories': 2,
    });
  });
});

describe('mergeStepStatistics', () => {
  const trajectory = fc.record(
    {
      reward: fc.double({ min: -10, max: 10, noNaN: true }),
      metrics: fc.dictionary(fc.constantFrom('solved', 'turns', 'reward'), fc.oneof(fc.boolean(), fc.integer())),
    },
    { requiredKeys: ['reward'] },
  );
  const group = fc.record(
    {
      trajectories: fc.array(trajectory, { maxLength: 5 }),
      exceptions: fc.array(fc.constant({ type: 'E', message: 'm', traceback: '' }), { maxLength: 2 }),
      metrics: fc.dictionary(fc.constantFrom('judge_ms'), fc.integer({ min: 0, max: 100 })),
    },
    { requiredKeys: ['trajectories'] },
  );

  it('gives the statistics of all the groups from those of any split into two logs', () => {
    fc.assert(
      fc.property(fc.array(group, { maxLength: 8 }), fc.nat(), (input, cut) => {
        const all = groups(input);
        const at = all.length === 0 ? 0 : cut % (all.length + 1);
        const merged = mergeStepStatistics(
          computeStepStatistics(all.slice(0, at)),
          computeStepStatistics(all.slice(at)),
        ).metrics;
        const whole = computeStepMetrics(all);
        expect(Object.keys(merged).sort()).toEqual(Object.keys(whole).sort());
        for (const [name, value] of Object.entries(whole)) {
          // Equal up to rounding, relative to the value's size.
          expect(Math.abs((merged[name] as number) - value)).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(value)));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps a value only one side has, and adds the counts', () => {
    const merged = mergeStepStatistics(
      { metrics: { reward: 1, 'data/step_num_trajectories': 2 }, weights: { reward: 2 } },
      { metrics: { loss: 0.5, 'data/step_num_trajectories': 3 }, weights: {} },
    );
    expect(merged.metrics).toEqual({ reward: 1, loss: 0.5, 'data/step_num_trajectories': 5 });
  });
});

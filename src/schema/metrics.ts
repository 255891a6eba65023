/**
 * The per-step metrics of logged trajectory groups, named as clients and dashboards expect
 * (`reward`, `reward_std_dev`, `frac_reward_zero_std`, `exception_rate`, trajectory metric means,
 * `group_<name>` means, `data/step_*` counts). One implementation, used by the local service's log route and by the
 * framework's `history.jsonl`.
 */
import type { TrajectoryGroup } from './trajectory.js';

/**
 * Computes a step's metrics from its trajectory groups, without the split prefix.
 *
 * - `reward`: mean reward over all trajectories;
 * - `reward_std_dev`: mean over groups (with at least one trajectory) of the population standard
 *   deviation of the group's rewards;
 * - `frac_reward_zero_std` (TRL's name): the fraction of those groups whose rewards are all equal
 *   (a single trajectory counts as all equal); such a group gives every trajectory a zero advantage
 *   and so carries no gradient;
 * - `exception_rate`: exceptions / (trajectories + exceptions);
 * - each trajectory metric: its mean over the trajectories that report it (booleans count 0/1);
 * - `group_<name>`: the mean of each group metric over the groups that report it;
 * - `data/step_num_trajectories`, `data/step_num_groups_submitted`,
 *   `data/step_num_groups_trainable` (a group is trainable when its rewards are not all equal).
 *
 * Means over nothing are left out (no `reward` when there is no trajectory); counts are always
 * present. Non-finite values are ignored.
 * @example
 * computeStepMetrics([{ trajectories: [{ reward: 1, metrics: { solved: true } }, { reward: 0, metrics: { solved: false } }] }]);
 * // { solved: 0.5, reward: 0.5, reward_std_dev: 0.5, frac_reward_zero_std: 0, exception_rate: 0, ... }
 */
export function computeStepMetrics(groups: readonly TrajectoryGroup[]): Record<string, number> {
  return computeStepStatistics(groups).metrics;
}

/**
 * A step's metrics with the weight of each: how many values each mean is over (trajectories,
 * groups, or trajectories plus exceptions), so that the statistics of two sets of groups merge into
 * those of both (see {@link mergeStepStatistics}). The `data/step_*` counts carry no weight: they add.
 */
export interface StepStatistics {
  /** As {@link computeStepMetrics} returns them. */
  readonly metrics: Record<string, number>;
  /** How many values each mean in `metrics` is over, by the same names (counts left out). */
  readonly weights: Record<string, number>;
}

/**
 * {@link computeStepMetrics} with the weight of each mean.
 * @example
 * computeStepStatistics([{ trajectories: [{ reward: 1 }, { reward: 0 }] }]).weights['reward']; // 2
 */
export function computeStepStatistics(groups: readonly TrajectoryGroup[]): StepStatistics {
  const trajectoryMetrics = new Map<string, Mean>();
  const groupMetrics = new Map<string, Mean>();
  const rewards = new Mean();
  const groupStdDevs = new Mean();
  let trajectoryCount = 0;
  let exceptionCount = 0;
  let trainableGroups = 0;
  let zeroStdGroups = 0;

  for (const group of groups) {
    const trajectories = group.trajectories ?? [];
    const groupRewards: number[] = [];
    for (const trajectory of trajectories) {
      trajectoryCount += 1;
      const reward = trajectory.reward ?? 0;
      if (Number.isFinite(reward)) {
        rewards.add(reward);
        groupRewards.push(reward);
      }
      for (const [name, value] of Object.entries(trajectory.metrics ?? {})) addMetric(trajectoryMetrics, name, value);
    }
    exceptionCount += group.exceptions?.length ?? 0;
    for (const [name, value] of Object.entries(group.metrics ?? {})) addMetric(groupMetrics, `group_${name}`, value);
    if (groupRewards.length > 0) groupStdDevs.add(populationStdDev(groupRewards));
    const differ = groupRewards.some((reward) => reward !== groupRewards[0]);
    if (differ) trainableGroups += 1;
    else if (groupRewards.length > 0) zeroStdGroups += 1;
  }

  const metrics: Record<string, number> = {};
  const weights: Record<string, number> = {};
  const set = (name: string, value: number, weight: number): void => {
    metrics[name] = value;
    weights[name] = weight;
  };
  for (const [name, mean] of trajectoryMetrics) set(name, mean.value(), mean.count);
  for (const [name, mean] of groupMetrics) set(name, mean.value(), mean.count);
  // The standard names come last so that a trajectory metric called `reward` cannot shadow them.
  if (rewards.count > 0) set('reward', rewards.value(), rewards.count);
  if (groupStdDevs.count > 0) {
    set('reward_std_dev', groupStdDevs.value(), groupStdDevs.count);
    set('frac_reward_zero_std', zeroStdGroups / groupStdDevs.count, groupStdDevs.count);
  }
  if (trajectoryCount + exceptionCount > 0)
    set('exception_rate', exceptionCount / (trajectoryCount + exceptionCount), trajectoryCount + exceptionCount);
  metrics['data/step_num_trajectories'] = trajectoryCount;
  metrics['data/step_num_groups_submitted'] = groups.length;
  metrics['data/step_num_groups_trainable'] = trainableGroups;
  return { metrics, weights };
}

/**
 * The statistics of two sets of groups together, from the statistics of each: every mean weighted
 * by how many values it is over, every count added. A metric only one side has keeps its value. A
 * metric without a weight on one side (not a count) takes the later side's value.
 * @example
 * const both = mergeStepStatistics(computeStepStatistics(firstBatch), computeStepStatistics(secondBatch));
 * // both.metrics equals computeStepMetrics([...firstBatch, ...secondBatch]), up to rounding
 */
export function mergeStepStatistics(earlier: StepStatistics, later: StepStatistics): StepStatistics {
  const metrics: Record<string, number> = { ...earlier.metrics };
  const weights: Record<string, number> = { ...earlier.weights };
  for (const [name, value] of Object.entries(later.metrics)) {
    const before = metrics[name];
    const weight = later.weights[name];
    const weightBefore = weights[name];
    if (name.startsWith(COUNT_PREFIX)) {
      metrics[name] = (before ?? 0) + value;
    } else if (before === undefined || weight === undefined || weightBefore === undefined) {
      metrics[name] = value;
      if (weight === undefined) delete weights[name];
      else weights[name] = weight;
    } else {
      const total = weightBefore + weight;
      metrics[name] = total === 0 ? value : before * (weightBefore / total) + value * (weight / total);
      weights[name] = total;
    }
  }
  return { metrics, weights };
}

/** The metrics that are counts (they add when statistics merge). */
const COUNT_PREFIX = 'data/step_num_';

/**
 * Prefixes every metric name with its split: `reward` becomes `train/reward`.
 * @example
 * prefixMetrics({ reward: 0.5 }, 'val'); // { 'val/reward': 0.5 }
 */
export function prefixMetrics(metrics: Readonly<Record<string, number>>, split: string): Record<string, number> {
  const prefixed: Record<string, number> = {};
  for (const [name, value] of Object.entries(metrics)) prefixed[`${split}/${name}`] = value;
  return prefixed;
}

/** A running mean that cannot overflow: each step weighs the old mean and the new value, never a sum. */
class Mean {
  count = 0;
  private mean = 0;
  add(value: number): void {
    this.count += 1;
    this.mean = this.mean * ((this.count - 1) / this.count) + value / this.count;
  }
  value(): number {
    return this.mean;
  }
}

function addMetric(into: Map<string, Mean>, name: string, value: number | boolean | undefined): void {
  const numeric = typeof value === 'boolean' ? Number(value) : value;
  if (typeof numeric !== 'number' || !Number.isFinite(numeric)) return;
  let mean = into.get(name);
  if (mean === undefined) {
    mean = new Mean();
    into.set(name, mean);
  }
  mean.add(numeric);
}

function populationStdDev(values: readonly number[]): number {
  // Scaled by the largest magnitude so that squares of rewards near the float limit stay finite.
  let scale = 0;
  for (const value of values) scale = Math.max(scale, Math.abs(value));
  if (scale === 0) return 0;
  const mean = new Mean();
  for (const value of values) mean.add(value / scale);
  const variance = new Mean();
  for (const value of values) variance.add((value / scale - mean.value()) ** 2);
  return scale * Math.sqrt(variance.value());
}

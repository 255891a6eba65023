/** Off-policy control: leave out groups sampled from a policy too many steps old. */
import { option, parseValue } from '../internal/option-schema.js';
import type { TrajectoryGroup } from '../schema/index.js';

const Step = option.integer({ min: 0 });
const StepsOffPolicy = option.number({ min: 0, allowInfinity: true, unit: 'steps' });

/** What {@link dropStaleGroups} kept and left out. */
export interface StalenessSplit {
  /** Groups within the staleness bound, in their original order. */
  readonly fresh: TrajectoryGroup[];
  /** Groups left out, in their original order (count them in your metrics). */
  readonly dropped: TrajectoryGroup[];
}

/**
 * The step a group was sampled at: the oldest `initial_policy_version` among its trajectories, or
 * undefined when none carries one.
 */
export function groupSampledStep(group: TrajectoryGroup): number | undefined {
  let oldest: number | undefined;
  for (const trajectory of group.trajectories) {
    const step = trajectory.initial_policy_version;
    if (typeof step === 'number' && (oldest === undefined || step < oldest)) oldest = step;
  }
  return oldest;
}

/**
 * Splits groups into fresh and stale: a group is stale when its oldest `initial_policy_version` is
 * more than `maxStepsOffPolicy` steps behind `step` (the step they would train at). Groups whose
 * trajectories carry no version are kept (nothing says they are old).
 * @example
 * const { fresh, dropped } = dropStaleGroups(groups, await model.getStep(), 1);
 * metrics['data/step_num_groups_dropped_stale'] = dropped.length;
 */
export function dropStaleGroups(
  groups: readonly TrajectoryGroup[],
  step: number,
  maxStepsOffPolicy: number,
): StalenessSplit {
  parseValue('step', Step, step);
  parseValue('maxStepsOffPolicy', StepsOffPolicy, maxStepsOffPolicy);
  const fresh: TrajectoryGroup[] = [];
  const dropped: TrajectoryGroup[] = [];
  for (const group of groups) {
    const oldest = groupSampledStep(group);
    if (oldest !== undefined && step - oldest > maxStepsOffPolicy) dropped.push(group);
    else fresh.push(group);
  }
  return { fresh, dropped };
}

/**
 * The one place groups are left out of training, for every reason and whoever calls it (a model's
 * `train`, an `RLTrainer` step): the rule, and the one `groups:dropped` payload that reports it.
 */
import { dropStaleGroups as splitStale } from '../rollout/drop-stale-groups.js';
import type { TrajectoryGroup } from '../schema/index.js';
import type { GroupsDroppedEvent } from './model-events.js';
import { hasZeroRewardVariance } from './training-input.js';

/** Why groups are left out, with the bound that applied. */
export type DropRule =
  /** Sampled more than `maxStepsOffPolicy` steps before the step they would train at. */
  | { readonly reason: 'stale'; readonly maxStepsOffPolicy: number }
  /** Rewards all equal: every advantage is zero, no gradient. */
  | { readonly reason: 'zero_variance' }
  /** Fewer than `minGroupSize` of the group's rollouts finished. */
  | { readonly reason: 'failed_rollouts'; readonly minGroupSize: number };

/** Where a drop happens and who hears of it. */
export interface DropContext {
  /** The step the groups were to train at. */
  readonly step: number;
  /** The groups as first given (for `groupIndexes`); defaults to the groups checked. */
  readonly given?: readonly TrajectoryGroup[] | undefined;
  /** Receives the event when at least one group is left out. */
  readonly emit: (event: GroupsDroppedEvent) => void;
}

/** What {@link dropGroups} kept and left out. */
export interface GroupDrop {
  /** Groups kept, in their order. */
  readonly kept: TrajectoryGroup[];
  /** How many were left out. */
  readonly dropped: number;
}

/**
 * Leaves out the groups `rule` rejects and, when there are any, reports them in one
 * `groups:dropped` payload: `{ reason, count, step, groupIndexes }` (plus the bound of the rule).
 */
export function dropGroups(groups: readonly TrajectoryGroup[], rule: DropRule, context: DropContext): GroupDrop {
  let kept: TrajectoryGroup[];
  let dropped: TrajectoryGroup[];
  if (rule.reason === 'stale') {
    const split = splitStale(groups, context.step, rule.maxStepsOffPolicy);
    kept = split.fresh;
    dropped = split.dropped;
  } else {
    const keep =
      rule.reason === 'zero_variance'
        ? (group: TrajectoryGroup) => !hasZeroRewardVariance(group)
        : (group: TrajectoryGroup) => group.trajectories.length >= rule.minGroupSize;
    kept = groups.filter(keep);
    dropped = groups.filter((group) => !keep(group));
  }
  if (dropped.length > 0) context.emit(droppedEvent(rule, dropped, context));
  return { kept, dropped: dropped.length };
}

function droppedEvent(rule: DropRule, dropped: readonly TrajectoryGroup[], context: DropContext): GroupsDroppedEvent {
  const given = context.given ?? [];
  const groupIndexes = dropped.map((group) => given.indexOf(group));
  const { step } = context;
  const event = { reason: rule.reason, count: dropped.length, step, currentStep: step, groupIndexes };
  if (rule.reason === 'stale') {
    const bound = rule.maxStepsOffPolicy;
    return { ...event, maxStepsOffPolicy: bound, maxStaleness: bound };
  }
  if (rule.reason === 'failed_rollouts') return { ...event, minGroupSize: rule.minGroupSize };
  return event;
}

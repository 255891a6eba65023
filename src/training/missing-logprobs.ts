/** The pre-upload check that every trainable Choice carries the logprobs RL needs. */
import { isChoice } from '../schema/index.js';
import type { MessageOrChoice, TrajectoryGroupInput } from '../schema/index.js';
import { MissingLogprobsError } from './errors.js';
import type { ChoiceLocation } from './errors.js';

/**
 * Every Choice in `groups` (main conversations and sub-agent histories) whose `logprobs.content`
 * is missing, in order.
 */
export function findChoicesWithoutLogprobs(groups: readonly TrajectoryGroupInput[]): ChoiceLocation[] {
  const found: ChoiceLocation[] = [];
  const scan = (
    items: readonly MessageOrChoice[] | undefined,
    groupIndex: number,
    trajectoryIndex: number,
    historyIndex: number | null,
  ): void => {
    for (const [itemIndex, item] of (items ?? []).entries()) {
      if (isChoice(item) && !Array.isArray(item.logprobs?.content)) {
        found.push({ groupIndex, trajectoryIndex, historyIndex, itemIndex });
      }
    }
  };
  for (const [groupIndex, group] of groups.entries()) {
    for (const [trajectoryIndex, trajectory] of group.trajectories.entries()) {
      scan(trajectory.messages_and_choices, groupIndex, trajectoryIndex, null);
      for (const [historyIndex, history] of (trajectory.additional_histories ?? []).entries()) {
        scan(history.messages_and_choices, groupIndex, trajectoryIndex, historyIndex);
      }
    }
  }
  return found;
}

/**
 * Throws {@link MissingLogprobsError} naming the first Choice without logprobs, if there is one.
 * @example
 * assertChoicesHaveLogprobs(groups); // before uploading an RL job
 */
export function assertChoicesHaveLogprobs(groups: readonly TrajectoryGroupInput[]): void {
  const found = findChoicesWithoutLogprobs(groups);
  const first = found[0];
  if (first !== undefined) throw new MissingLogprobsError(first, found.length);
}

/**
 * The one pass over a batch before it trains, for whoever trains it (`model.train`, an `RLTrainer`
 * step): the argument's shape (an array of groups, no key the schema does not know), each group
 * parsed, the drop rules (stale, too few finished rollouts, equal rewards), the logprobs RL needs,
 * and whether anything is left to learn from. It returns the batch to train and what was left out
 * and why; nothing else looks at the groups again before they are uploaded.
 */
import type { z } from 'zod';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import { describeValue } from '../internal/describe-value.js';
import { formatIssues } from '../internal/format-issues.js';
import { groupSampledStep } from '../rollout/drop-stale-groups.js';
import { isChoice, TrajectoryGroup } from '../schema/index.js';
import type { MessageOrChoice, Trajectory } from '../schema/index.js';
import { MissingLogprobsError } from './errors.js';
import type { ChoiceLocation } from './errors.js';
import type { GroupsDroppedEvent } from './model-events.js';
import { GROUP_KEYS, TRAJECTORY_KEYS, unknownKeyIssues } from './training-input.js';

/** The rules a batch is held to. */
export interface BatchRules {
  /** The step the batch trains at (the model's step). */
  readonly step: number;
  /**
   * Leave out groups sampled more than this many steps before `step` (by their trajectories'
   * `initial_policy_version`); none left out when undefined.
   */
  readonly maxStepsOffPolicy?: number | undefined;
  /** Leave out groups with fewer than this many finished rollouts; none when undefined. */
  readonly minGroupSize?: number | undefined;
  /** Refuse Choices without token logprobs ({@link MissingLogprobsError}). */
  readonly requireLogprobs: boolean;
}

/** A batch checked and sorted: what trains, and what was left out and why. */
export interface TrainingBatch {
  /** The step it trains at. */
  readonly step: number;
  /**
   * The groups that count in the step's `train/*` metrics (in their order): every group but the
   * stale ones and the ones with too few finished rollouts. Equal-reward groups are here.
   */
  readonly groups: readonly TrajectoryGroup[];
  /** The groups sent to the service: {@link groups} without the equal-reward ones. */
  readonly upload: readonly TrajectoryGroup[];
  /** One event per reason that left at least one group out, in the order the rules apply. */
  readonly dropped: readonly GroupsDroppedEvent[];
  /**
   * The batch's own metrics for the step's row: `groups/dropped_stale`, `groups/dropped_failed`,
   * `groups/dropped_zero_variance` and `rollouts/failed` (failed rollouts kept in the groups'
   * `exceptions`, counted over every group given).
   */
  readonly metrics: Readonly<Record<string, number>>;
  /** Why nothing can be trained (no group with a Choice and differing rewards), or undefined. */
  readonly nothingToTrain: NothingToTrain | undefined;
}

/**
 * Why a batch has nothing to train: no group left (`no_groups`), every group's rewards equal
 * (`equal_rewards`: a trainer skips such a batch), or no Choice where rewards differ (`no_choice`:
 * the rollouts did not record completions, which a trainer reports rather than skips).
 */
export interface NothingToTrain {
  readonly reason: 'no_groups' | 'equal_rewards' | 'no_choice';
  readonly message: string;
}

type Issue = z.core.$ZodIssue;

/** What the pass learns of one group. */
interface GroupFacts {
  readonly group: TrajectoryGroup;
  readonly index: number;
  readonly stale: boolean;
  readonly tooFew: boolean;
  readonly flat: boolean;
  readonly hasChoice: boolean;
}

/**
 * Checks and sorts `input` in one pass. Throws `InvalidArgumentError` (argument `groups`) when it
 * is not an array of groups or a group or trajectory has a key the schema does not know (naming
 * the likely key), and {@link MissingLogprobsError} for a kept Choice without logprobs when
 * `rules.requireLogprobs`. When nothing can be trained the batch says why in `nothingToTrain`
 * (`model.train` throws it; a trainer skips the batch).
 * @example
 * const batch = prepareBatch(groups, { step: 3, maxStepsOffPolicy: 1, requireLogprobs: true });
 * if (batch.nothingToTrain === undefined) upload(batch.upload);
 */
export function prepareBatch(input: unknown, rules: BatchRules): TrainingBatch {
  if (!Array.isArray(input)) throw notAnArray(input);
  const issues: Issue[] = [];
  const facts: GroupFacts[] = [];
  let failedRollouts = 0;
  input.forEach((raw: unknown, index) => {
    const shapeIssues = groupKeyIssues(raw, index);
    if (shapeIssues.length > 0) {
      issues.push(...shapeIssues);
      return;
    }
    const group = parseGroup(raw, index);
    failedRollouts += group.exceptions?.length ?? 0;
    facts.push(judgeGroup(group, index, rules));
  });
  if (issues.length > 0) throw new InvalidArgumentError('groups', issues);

  const stale = facts.filter((fact) => fact.stale);
  const tooFew = facts.filter((fact) => !fact.stale && fact.tooFew);
  const kept = facts.filter((fact) => !fact.stale && !fact.tooFew);
  const flat = kept.filter((fact) => fact.flat);
  const dropped: GroupsDroppedEvent[] = [];
  const report = (reason: GroupsDroppedEvent['reason'], list: readonly GroupFacts[], bound: object): void => {
    if (list.length === 0) return;
    const groupIndexes = list.map((fact) => fact.index);
    dropped.push({ reason, count: list.length, step: rules.step, groupIndexes, ...bound });
  };
  report('stale', stale, { maxStepsOffPolicy: rules.maxStepsOffPolicy });
  report('failed_rollouts', tooFew, { minGroupSize: rules.minGroupSize });
  // Equal rewards give every trajectory of the group a zero advantage: no gradient, so the
  // service is not asked to process them (the step's row still counts them).
  report('zero_variance', flat, {});
  const nothingToTrain = explainNothingToTrain(kept, stale.length, rules.maxStepsOffPolicy);
  if (rules.requireLogprobs && nothingToTrain === undefined) assertLogprobs(kept);
  return {
    step: rules.step,
    groups: kept.map((fact) => fact.group),
    upload: kept.filter((fact) => !fact.flat).map((fact) => fact.group),
    dropped,
    metrics: {
      'groups/dropped_stale': stale.length,
      'groups/dropped_failed': tooFew.length,
      'groups/dropped_zero_variance': flat.length,
      'rollouts/failed': failedRollouts,
    },
    nothingToTrain,
  };
}

/** Group `index` parsed against the schema; the error names it and what is wrong. */
export function parseGroup(raw: unknown, index: number): TrajectoryGroup {
  const parsed = TrajectoryGroup.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new InvalidArgumentError(
    'groups',
    `Expected trajectory group ${index} to be a TrajectoryGroup: ${formatIssues(parsed.error.issues)}`,
    { cause: parsed.error },
  );
}

/** True when a group's rewards are all equal (or it has no trajectory): every advantage is zero. */
export function hasZeroRewardVariance(group: TrajectoryGroup): boolean {
  const first = group.trajectories[0]?.reward ?? 0;
  return group.trajectories.every((trajectory) => (trajectory.reward ?? 0) === first);
}

function judgeGroup(group: TrajectoryGroup, index: number, rules: BatchRules): GroupFacts {
  const sampledStep = groupSampledStep(group);
  const stale =
    rules.maxStepsOffPolicy !== undefined &&
    sampledStep !== undefined &&
    rules.step - sampledStep > rules.maxStepsOffPolicy;
  const tooFew = rules.minGroupSize !== undefined && group.trajectories.length < rules.minGroupSize;
  return { group, index, stale, tooFew, flat: hasZeroRewardVariance(group), hasChoice: groupHasChoice(group) };
}

function notAnArray(input: unknown): InvalidArgumentError {
  const single =
    input !== null && typeof input === 'object' && 'trajectories' in input
      ? ' (one group? pass it in an array: `train([group])`)'
      : '';
  const message = `Expected \`groups\` to be an array of trajectory groups ({ trajectories: [...] }), got ${describeValue(input)}${single}`;
  return new InvalidArgumentError('groups', [{ code: 'custom', path: [], message, input } as Issue]);
}

/** Keys of a group and of its trajectories that the schema does not know. */
function groupKeyIssues(group: unknown, groupIndex: number): Issue[] {
  const issues = unknownKeyIssues(group, GROUP_KEYS, ['groups', groupIndex], `group ${groupIndex}`);
  const trajectories = (group as { trajectories?: unknown } | null)?.trajectories;
  if (!Array.isArray(trajectories)) return issues; // the schema says what is wrong with it
  trajectories.forEach((trajectory: unknown, trajectoryIndex) => {
    issues.push(
      ...unknownKeyIssues(
        trajectory,
        TRAJECTORY_KEYS,
        ['groups', groupIndex, 'trajectories', trajectoryIndex],
        `trajectory ${trajectoryIndex} of group ${groupIndex}`,
      ),
    );
  });
  return issues;
}

function itemsHaveChoice(items: readonly MessageOrChoice[] | undefined): boolean {
  return (items ?? []).some((item) => isChoice(item));
}

/** True when a trajectory (or one of its sub-agent histories) holds a Choice. */
function trajectoryHasChoice(trajectory: Trajectory): boolean {
  return (
    itemsHaveChoice(trajectory.messages_and_choices) ||
    (trajectory.additional_histories ?? []).some((history) => itemsHaveChoice(history.messages_and_choices))
  );
}

function groupHasChoice(group: TrajectoryGroup): boolean {
  return group.trajectories.some(trajectoryHasChoice);
}

function listIndexes(indexes: readonly number[]): string {
  const shown = indexes.slice(0, 8).join(', ');
  return indexes.length > 8 ? `${shown}, ... (${indexes.length} in all)` : shown;
}

/**
 * Why `kept` has nothing to train (no group with a Choice and rewards that differ: under
 * group-relative advantages every token then has advantage 0), or undefined when it has.
 */
function explainNothingToTrain(
  kept: readonly GroupFacts[],
  staleCount: number,
  maxStepsOffPolicy: number | undefined,
): NothingToTrain | undefined {
  if (kept.some((fact) => fact.hasChoice && !fact.flat)) return undefined;
  if (kept.length === 0) {
    const stale = staleCount > 0 ? ` (all ${staleCount} were more than ${maxStepsOffPolicy} steps stale)` : '';
    return { reason: 'no_groups', message: `Expected at least one trajectory group to train on, got none${stale}.` };
  }
  const trajectoryCount = kept.reduce((sum, fact) => sum + fact.group.trajectories.length, 0);
  if (!kept.some((fact) => fact.hasChoice)) {
    return {
      reason: kept.every((fact) => fact.flat) ? 'equal_rewards' : 'no_choice',
      message:
        `Expected a trajectory with a Choice (a completion sampled from the model, the part RL trains on), ` +
        `got none in ${trajectoryCount} trajectories of ${kept.length} groups: messages alone are context. ` +
        'Completions made with `model.openai()` inside `gatherTrajectoryGroups` are recorded as Choices ' +
        'in `messages_and_choices`.',
    };
  }
  if (kept.every((fact) => fact.flat)) {
    const rewards = kept
      .slice(0, 4)
      .map((fact) => `group ${fact.index}: all ${fact.group.trajectories[0]?.reward ?? 0}`)
      .join(', ');
    const message =
      `Expected a group whose rewards differ, got ${kept.length} groups whose rewards are all equal ` +
      `(${rewards}${kept.length > 4 ? ', ...' : ''}): each trajectory's advantage is its reward minus ` +
      "its group's mean, so such groups carry no gradient. Sample more trajectories per group or make " +
      'the reward tell them apart.';
    return { reason: 'equal_rewards', message };
  }
  const message =
    `Expected a group whose rewards differ and that has a Choice, got none: groups ` +
    `${listIndexes(kept.filter((fact) => !fact.hasChoice).map((fact) => fact.index))} have no Choice, and groups ` +
    `${listIndexes(kept.filter((fact) => fact.hasChoice).map((fact) => fact.index))} have rewards that are all equal.`;
  return { reason: 'no_choice', message };
}

/** Throws {@link MissingLogprobsError} naming the first kept Choice without logprobs (by its index as given). */
function assertLogprobs(kept: readonly GroupFacts[]): void {
  const found: ChoiceLocation[] = [];
  const scan = (items: readonly MessageOrChoice[] | undefined, at: Omit<ChoiceLocation, 'itemIndex'>): void => {
    for (const [itemIndex, item] of (items ?? []).entries()) {
      if (isChoice(item) && !Array.isArray(item.logprobs?.content)) found.push({ ...at, itemIndex });
    }
  };
  for (const { group, index: groupIndex } of kept) {
    for (const [trajectoryIndex, trajectory] of group.trajectories.entries()) {
      scan(trajectory.messages_and_choices, { groupIndex, trajectoryIndex, historyIndex: null });
      for (const [historyIndex, history] of (trajectory.additional_histories ?? []).entries()) {
        scan(history.messages_and_choices, { groupIndex, trajectoryIndex, historyIndex });
      }
    }
  }
  const first = found[0];
  if (first !== undefined) throw new MissingLogprobsError(first, found.length);
}

/**
 * The error of a batch with nothing to train, as `model.train` throws it: `PolicyloopError` when
 * no group is left at all (every one too stale), else `InvalidArgumentError` (argument `groups`).
 */
export function nothingToTrainError(batch: TrainingBatch, input: unknown): PolicyloopError {
  const message = batch.nothingToTrain?.message ?? 'Expected something to train.';
  if (batch.nothingToTrain?.reason === 'no_groups') return new PolicyloopError(message);
  return new InvalidArgumentError('groups', [{ code: 'custom', path: [], message, input } as Issue]);
}

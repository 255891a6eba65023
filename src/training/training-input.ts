/**
 * The checks `model.train(groups)` makes before anything happens: the argument is an array of
 * groups, no group or trajectory has a key the schema does not know (a typo such as `messages`
 * would otherwise be kept and trained as nothing), and the batch has something to train: a group
 * whose rewards differ and that holds a Choice. The wire schema stays tolerant of extra keys (the
 * services accept them); this strictness is for what callers hand to `train()`.
 */
import type { z } from 'zod';
import { InvalidArgumentError } from '../client/errors.js';
import { describeValue } from '../internal/describe-value.js';
import { isChoice, Trajectory, TrajectoryGroup, TURN_ORDER_KEY } from '../schema/index.js';
import type { MessageOrChoice } from '../schema/index.js';
import { pushAll } from '../internal/arrays.js';

// `turn_order`: the recorder's order of a run's turns across its conversations (schema/run-order.ts).
const TRAJECTORY_KEYS: readonly string[] = [...Object.keys(Trajectory.shape), TURN_ORDER_KEY];
const GROUP_KEYS: readonly string[] = Object.keys(TrajectoryGroup.shape);

/** Likely meanings of keys that edit distance alone would not find. */
const KNOWN_TYPOS: Readonly<Record<string, string>> = {
  messages: 'messages_and_choices',
  choices: 'messages_and_choices',
  conversation: 'messages_and_choices',
  score: 'reward',
  rewards: 'reward',
  histories: 'additional_histories',
  trajectory: 'trajectories',
  rollouts: 'trajectories',
  exception: 'exceptions',
  errors: 'exceptions',
};

type Issue = z.core.$ZodIssue;

function issue(path: PropertyKey[], message: string, input: unknown): Issue {
  return { code: 'custom', path, message, input } as Issue;
}

/**
 * The known key `key` most likely stands for: a known typo, else the nearest by edit distance
 * (at most a third of the key's length), else null.
 * @example
 * suggestKey('messages', ['messages_and_choices', 'reward']); // 'messages_and_choices'
 * suggestKey('rewrd', ['messages_and_choices', 'reward']); // 'reward'
 */
export function suggestKey(key: string, known: readonly string[]): string | null {
  const typo = KNOWN_TYPOS[key.toLowerCase()];
  if (typo !== undefined && known.includes(typo)) return typo;
  let best: string | null = null;
  let bestDistance = Math.max(1, Math.floor(key.length / 3));
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate);
    if (distance <= bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

function unknownKeyIssues(value: unknown, known: readonly string[], path: PropertyKey[], what: string): Issue[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  const issues: Issue[] = [];
  for (const key of Object.keys(value)) {
    if (known.includes(key)) continue;
    const suggestion = suggestKey(key, known);
    issues.push(
      issue(
        path,
        `Unknown key \`${key}\` in ${what}` +
          (suggestion === null
            ? ` (expected only ${known.map((name) => `\`${name}\``).join(', ')})`
            : `: did you mean \`${suggestion}\`?`),
        value,
      ),
    );
  }
  return issues;
}

/**
 * Throws `InvalidArgumentError` (argument `groups`) unless `groups` is an array and no group or
 * trajectory in it has a top-level key the schema does not know; each issue names the group, the
 * trajectory and the likely key.
 * @example
 * assertTrainingGroupsShape([{ trajectories: [{ messages: [], reward: 1 }] }]);
 * // InvalidArgumentError: Invalid groups: groups[0].trajectories[0]: Unknown key `messages` in trajectory 0 of group 0: did you mean `messages_and_choices`?
 */
export function assertTrainingGroupsShape(groups: unknown): void {
  if (!Array.isArray(groups)) {
    const single =
      groups !== null && typeof groups === 'object' && 'trajectories' in groups
        ? ' (one group? pass it in an array: `train([group])`)'
        : '';
    throw new InvalidArgumentError('groups', [
      issue(
        [],
        `Expected \`groups\` to be an array of trajectory groups ({ trajectories: [...] }), got ${describeValue(groups)}${single}`,
        groups,
      ),
    ]);
  }
  const issues: Issue[] = [];
  groups.forEach((group: unknown, groupIndex) => {
    pushAll(issues, unknownKeyIssues(group, GROUP_KEYS, ['groups', groupIndex], `group ${groupIndex}`));
    const trajectories = (group as { trajectories?: unknown } | null)?.trajectories;
    if (!Array.isArray(trajectories)) return; // the schema says what is wrong with it
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
  });
  if (issues.length > 0) throw new InvalidArgumentError('groups', issues);
}

function hasChoice(items: readonly MessageOrChoice[] | undefined): boolean {
  return (items ?? []).some((item) => isChoice(item));
}

/** True when a trajectory (or one of its sub-agent histories) holds a Choice. */
function trajectoryHasChoice(trajectory: Trajectory): boolean {
  return (
    hasChoice(trajectory.messages_and_choices) ||
    (trajectory.additional_histories ?? []).some((history) => hasChoice(history.messages_and_choices))
  );
}

/** True when a group's rewards are all equal (or it has no trajectory): every advantage is zero. */
export function hasZeroRewardVariance(group: TrajectoryGroup): boolean {
  const first = group.trajectories[0]?.reward ?? 0;
  return group.trajectories.every((trajectory) => (trajectory.reward ?? 0) === first);
}

function listIndexes(indexes: readonly number[]): string {
  const shown = indexes.slice(0, 8).join(', ');
  return indexes.length > 8 ? `${shown}, ... (${indexes.length} in all)` : shown;
}

/**
 * Throws `InvalidArgumentError` (argument `groups`) when the batch has nothing to train: no
 * trajectory holds a Choice (a sampled completion: the trainable part), or no group with a Choice
 * has rewards that differ (under group-relative advantages every token then has advantage 0).
 * @example
 * assertSomethingToTrain(TrajectoryGroup.array().parse([{ trajectories: [{ reward: 1 }, { reward: 0 }] }]));
 * // InvalidArgumentError: ... no trajectory has a Choice ...
 */
export function assertSomethingToTrain(groups: readonly TrajectoryGroup[]): void {
  const withChoice = groups.map((group) => group.trajectories.some(trajectoryHasChoice));
  const zeroVariance = groups.map(hasZeroRewardVariance);
  if (groups.some((_, index) => withChoice[index] === true && zeroVariance[index] === false)) return;
  const trajectoryCount = groups.reduce((sum, group) => sum + group.trajectories.length, 0);
  const indexes = (keep: (index: number) => boolean) => groups.map((_, index) => index).filter(keep);
  let message: string;
  if (!withChoice.some(Boolean)) {
    message =
      `Expected a trajectory with a Choice (a completion sampled from the model, the part RL trains on), ` +
      `got none in ${trajectoryCount} trajectories of ${groups.length} groups: messages alone are context. ` +
      'Completions made with `model.openai()` inside `gatherTrajectoryGroups` are recorded as Choices ' +
      'in `messages_and_choices`.';
  } else if (zeroVariance.every(Boolean)) {
    const rewards = groups
      .slice(0, 4)
      .map((group, index) => `group ${index}: all ${group.trajectories[0]?.reward ?? 0}`)
      .join(', ');
    message =
      `Expected a group whose rewards differ, got ${groups.length} groups whose rewards are all equal ` +
      `(${rewards}${groups.length > 4 ? ', ...' : ''}): each trajectory's advantage is its reward minus ` +
      "its group's mean, so such groups carry no gradient. Sample more trajectories per group or make " +
      'the reward tell them apart.';
  } else {
    message =
      `Expected a group whose rewards differ and that has a Choice, got none: groups ` +
      `${listIndexes(indexes((index) => withChoice[index] !== true))} have no Choice, and groups ` +
      `${listIndexes(indexes((index) => withChoice[index] === true))} have rewards that are all equal.`;
  }
  throw new InvalidArgumentError('groups', [issue([], message, groups)]);
}

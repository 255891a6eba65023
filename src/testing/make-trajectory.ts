/** Building trajectories and groups by hand, for testing reward functions and training code. */
import {
  Trajectory,
  TrajectoryGroup,
  type ChatCompletionMessageParam,
  type Choice,
  type MessageOrChoice,
  type TrajectoryGroupInput,
  type TrajectoryInput,
} from '../schema/index.js';
import { makeChoice } from './make-choice.js';

/** Options of {@link makeTrajectory}: any trajectory field, plus shortcuts for a one-turn chat. */
export interface MakeTrajectoryOptions extends TrajectoryInput {
  /** A system message first. */
  system?: string | undefined;
  /** A user message (after the system message). */
  user?: string | undefined;
  /** The model's answer last: text (a Choice with logprobs is made) or a Choice. */
  answer?: string | Choice | undefined;
}

/**
 * A parsed `Trajectory`: `system`, `user`, then `messages_and_choices`, then `answer`.
 * @example
 * const trajectory = makeTrajectory({ user: 'What is 2+2?', answer: '4', reward: 1 });
 */
export function makeTrajectory(options: MakeTrajectoryOptions = {}): Trajectory {
  const { system, user, answer, messages_and_choices: items = [], ...rest } = options;
  const head: ChatCompletionMessageParam[] = [];
  if (system !== undefined) head.push({ role: 'system', content: system });
  if (user !== undefined) head.push({ role: 'user', content: user });
  const tail: MessageOrChoice[] = [];
  if (answer !== undefined) tail.push(typeof answer === 'string' ? makeChoice(answer) : answer);
  return Trajectory.parse({ ...rest, messages_and_choices: [...head, ...items, ...tail] });
}

/**
 * A parsed `TrajectoryGroup` of the given trajectories (options are made with {@link makeTrajectory}).
 * @example
 * const group = makeGroup([{ answer: '4', reward: 1 }, { answer: '5', reward: 0 }]);
 */
export function makeGroup(
  trajectories: readonly (MakeTrajectoryOptions | Trajectory)[],
  fields: Omit<TrajectoryGroupInput, 'trajectories'> = {},
): TrajectoryGroup {
  return TrajectoryGroup.parse({
    ...fields,
    trajectories: trajectories.map((trajectory) => makeTrajectory(trajectory)),
  });
}

/**
 * An `Environment` built by hand (the contract of src/environments/environment.ts, without
 * `defineEnvironment`): tasks, a rollout that asks `context.model` once (or the test's own), a
 * reward spec and a group judge, so evaluation is tested against the interface alone.
 */
import type { RolloutContext, TrajectoryInput } from 'policyloop';
import type { RewardSpec } from '../../../src/rewards/combine-rewards.js';
import type { PromptedModel, TrainableModel } from 'policyloop';
import { combineRewards } from 'policyloop';
import type { Environment, EnvironmentRun } from '../../../src/environments/environment.js';
import type { GroupScorer } from '../../../src/rollout/gather-trajectory-groups.js';

/** A question and its answer. */
export interface QuestionTask {
  prompt: string;
  answer: string;
}

/** What the hand-made rollout gets. */
export interface HandContext extends Pick<RolloutContext, 'signal' | 'index' | 'groupIndex'> {
  model: PromptedModel | TrainableModel;
  sampling: Readonly<Record<string, unknown>>;
}

/** A spec of a hand-made environment. */
export interface HandSpec<T> {
  name?: string;
  args?: Record<string, unknown>;
  tasks: readonly T[];
  // biome-ignore lint/suspicious/noConfusingVoidType: a rollout may return nothing
  rollout?: (task: T, context: HandContext) => Promise<TrajectoryInput | void>;
  reward?: RewardSpec<T>;
  scoreGroup?: GroupScorer<T>;
  /** Counts `start` and `close` calls. */
  lifecycle?: { starts: number; closes: number };
}

/** One model call with the task's prompt, sampling spread in. */
export async function askOnce(task: { prompt: string }, context: HandContext): Promise<void> {
  await context.model.openai().chat.completions.create({
    model: '',
    messages: [{ role: 'user', content: task.prompt }],
    ...context.sampling,
  });
}

/** The environment of `spec`. */
export function handEnvironment<T extends object>(spec: HandSpec<T>): Environment<T> {
  const rollout = spec.rollout ?? (askOnce as unknown as NonNullable<HandSpec<T>['rollout']>);
  const rubric =
    spec.reward === undefined || typeof spec.reward === 'function'
      ? []
      : Object.entries(spec.reward).map(([name, entry]) => ({
          name,
          weight: typeof entry === 'function' ? 1 : (entry.weight ?? 1),
        }));
  const reward =
    spec.reward === undefined
      ? undefined
      : typeof spec.reward === 'function'
        ? spec.reward
        : combineRewards(spec.reward);
  return {
    kind: 'environment',
    name: spec.name ?? 'hand',
    args: spec.args ?? {},
    spec: { name: spec.name ?? 'hand', dataset: spec.tasks },
    hasEvalDataset: true,
    async *dataset() {
      yield* spec.tasks;
    },
    async *evalDataset() {
      yield* spec.tasks;
    },
    async start({ model, sampling }): Promise<EnvironmentRun<T>> {
      if (spec.lifecycle) spec.lifecycle.starts += 1;
      return {
        rollout: (task, context) =>
          rollout(task, {
            model,
            sampling: sampling ?? {},
            signal: context.signal,
            index: context.index,
            groupIndex: context.groupIndex,
          }),
        reward,
        rubric,
        scoreGroup: spec.scoreGroup,
        async close() {
          if (spec.lifecycle) spec.lifecycle.closes += 1;
        },
      };
    },
  };
}

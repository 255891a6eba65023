/** The `Environment` a spec becomes, and what a run of it gives a trainer or an evaluation. */
import type { RewardFn } from '../rewards/reward-function.js';
import type { GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { RolloutFn } from '../rollout/rollout-function.js';
import type { PromptedModel } from '../training/prompted-model.js';
import type { TrainableModel } from '../training/trainable-model.js';
import type { EnvironmentSpec } from './environment-types.js';

/** Options of {@link Environment.start}. */
export interface EnvironmentStartOptions {
  /** The model the rollouts call (`context.model`): the one trained or evaluated. */
  model: PromptedModel | TrainableModel;
  /** Request parameters every model call of the default loop sends (`context.sampling`). */
  sampling?: Readonly<Record<string, unknown>> | undefined;
  /** Aborts the start (tool sources starting). */
  signal?: AbortSignal | undefined;
}

/**
 * An environment started for one run (a training run or an evaluation): its tool sources are
 * started, and it gives what `gatherTrajectoryGroups` takes. Close it when the run ends.
 */
export interface EnvironmentRun<T> {
  /** One rollout of a task, with the environment's tools, setup and cleanup. */
  readonly rollout: RolloutFn<T>;
  /** The reward of each trajectory (the rubric combined), when the environment has one. */
  readonly reward: RewardFn<T> | undefined;
  /** The rubric's function names and weights (empty for a single reward function). */
  readonly rubric: readonly { readonly name: string; readonly weight: number }[];
  /** The group judge, when the environment has one. */
  readonly scoreGroup: GroupScorer<T> | undefined;
  /** Stops what the run started (shared tool servers). Idempotent. */
  close(): Promise<void>;
}

/**
 * A task set with its interaction and its rubric (see `defineEnvironment`). Train on it with
 * `new RLTrainer({ model, environment })`, measure a model with `evaluate` or `policyloop eval`.
 */
export interface Environment<T = unknown> {
  /** Marks the object as an environment (so that a loaded module's export can be checked). */
  readonly kind: 'environment';
  /** The environment's name. */
  readonly name: string;
  /** The arguments it was loaded with (`loadEnvironment(id, args)`), for eval metadata. */
  readonly args: Readonly<Record<string, unknown>>;
  /** The spec it was defined from. */
  readonly spec: EnvironmentSpec<T>;
  /** The training tasks, read in order. */
  dataset(): AsyncIterable<T>;
  /** The held-out tasks (the training tasks when the spec has none), read in order. */
  evalDataset(): AsyncIterable<T>;
  /** Whether the spec has held-out tasks of its own. */
  readonly hasEvalDataset: boolean;
  /** Starts it for a run with `model`: tool sources start (failing fast, naming the source). */
  start(options: EnvironmentStartOptions): Promise<EnvironmentRun<T>>;
}

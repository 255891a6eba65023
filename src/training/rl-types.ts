/**
 * The types of the RL trainer, in a module of their own so that the trainer (`rl-trainer.ts`) and
 * its run (`rl-run.ts`) both depend on them and not on each other.
 */
import type { RewardSpec } from '../rewards/combine-rewards.js';
import type { RewardFn } from '../rewards/reward-function.js';
import type { GatherOptions, GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { ProgressStream } from '../rollout/progress-bar.js';
import type { RolloutFn } from '../rollout/rollout-function.js';
import type { GroupsDroppedEvent } from './model-events.js';
import type { PromptedModel } from './prompted-model.js';
import type { LearningRateSchedule } from './schedules.js';
import type { JobOptions, TrainParams } from './backend.js';
import type { TrainableModel } from './trainable-model.js';

/** Validation of an {@link RLTrainer} run. */
export interface RLValidationOptions<S> {
  /**
   * The held-out scenarios, all rolled out at each validation.
   * @default the `environment`'s `evalDataset` (required without an environment)
   */
  scenarios?: readonly S[] | undefined;
  /**
   * Validate every this many steps (at steps that are multiples of it), and at the start.
   * @default 10
   */
  every?: number | undefined;
  /**
   * Rollouts per validation scenario.
   * @default 1
   */
  groupSize?: number | undefined;
  /**
   * Prompted models scored by the same rollouts once at the start, each into its own history
   * (their requests for the trained model's name go to them instead).
   * @default []
   */
  baselines?: readonly PromptedModel[] | undefined;
}

/** Which checkpoints an {@link RLTrainer} run keeps; the others are deleted as the run goes. */
export interface RLKeepOptions {
  /**
   * Keep the checkpoint with the best `metric`.
   * @default true
   */
  best?: boolean | undefined;
  /**
   * Keep the latest checkpoint at the end of the run (during the run it is always kept: training
   * continues from it).
   * @default true
   */
  latest?: boolean | undefined;
  /**
   * The history metric that decides the best.
   * @default 'val/reward'
   */
  metric?: string | undefined;
  /**
   * Whether a higher value is better.
   * @default 'max'
   */
  direction?: 'max' | 'min' | undefined;
}

/** Optional limits of one {@link RLTrainer.run}; reaching one stops cleanly after the current step. */
export interface RLBudget {
  /** Steps trained by this run (`maxSteps` is absolute; this counts from where the run started). */
  steps?: number | undefined;
  /** Wall time of the run, in seconds. */
  seconds?: number | undefined;
  /** Tokens sampled (the `usage.total_tokens` of the completions of `model.openai()` clients). */
  tokens?: number | undefined;
}

/**
 * An environment started for a trainer's run: what `Environment.start` gives (the rollout of a
 * task with the environment's tools, setup and cleanup; its reward and group judge).
 */
export interface TrainerEnvironmentRun<S> {
  /** One rollout of a task. */
  readonly rollout: RolloutFn<S>;
  /** The reward of each trajectory (the rubric combined), if any. */
  readonly reward: RewardFn<S> | undefined;
  /** The group judge, if any. */
  readonly scoreGroup: GroupScorer<S> | undefined;
  /** Stops what the run started; the trainer calls it when its run ends, whatever the outcome. */
  close(): Promise<void>;
}

/**
 * What an {@link RLTrainer} needs of an environment (an `Environment` from `defineEnvironment` or
 * `loadEnvironment` is one): its tasks, train and held-out, and a run of it for a model.
 * @example
 * const trainer = new RLTrainer({ model, environment: await loadEnvironment('@acme/env-math'), maxSteps: 50 });
 */
export interface TrainerEnvironment<S> {
  /** The environment's name. */
  readonly name: string;
  /** Whether it has held-out tasks of its own (then the trainer validates on them by default). */
  readonly hasEvalDataset: boolean;
  /** The training tasks, read in order (the trainer reads them again for each epoch). */
  dataset(): AsyncIterable<S>;
  /** The held-out tasks, read in order (read once at the start of a run, for validation). */
  evalDataset(): AsyncIterable<S>;
  /** Starts it for a run of `model` (tool sources start), once per `run()`. */
  start(options: {
    model: TrainableModel;
    sampling?: Readonly<Record<string, unknown>> | undefined;
    signal?: AbortSignal | undefined;
  }): Promise<TrainerEnvironmentRun<S>>;
}

/** Options of `new RLTrainer(...)`. */
export interface RLTrainerOptions<S> {
  /** The registered model to train. */
  model: TrainableModel;
  /**
   * The task set to train on (`defineEnvironment`, `loadEnvironment`): it gives the scenarios
   * (its `dataset`, cycled epoch after epoch), the rollout, the reward, the group judge and, when
   * it has an `evalDataset`, the validation scenarios (every 10 steps). Each of these options,
   * when given, wins over the environment's. Started when a run starts, closed when it ends.
   */
  environment?: TrainerEnvironment<S> | undefined;
  /**
   * The training scenarios: an array (cycled) or an iterable or async iterable (read once, in order).
   * @default the `environment`'s dataset (required without an environment)
   */
  scenarios?: readonly S[] | Iterable<S> | AsyncIterable<S> | undefined;
  /**
   * One rollout of a scenario, as `gatherTrajectoryGroups` takes it.
   * @default the `environment`'s rollout (required without an environment)
   */
  rollout?: RolloutFn<S> | undefined;
  /**
   * Request parameters of every model call of the `environment`'s default agent loop
   * (`context.sampling`), e.g. `{ max_tokens: 64, temperature: 1 }`: without `max_tokens` a
   * local model samples up to its context. None by default.
   */
  sampling?: Readonly<Record<string, unknown>> | undefined;
  /**
   * The reward of each trajectory, as `gatherTrajectoryGroups` takes it.
   * @default the `environment`'s reward
   */
  reward?: RewardSpec<S> | undefined;
  /**
   * Scores each group as a whole (e.g. `relativeJudge`), as `gatherTrajectoryGroups` takes it.
   * @default the `environment`'s scoreGroup
   */
  scoreGroup?: GroupScorer<S> | undefined;
  /**
   * Rollouts per scenario.
   * @default 8
   */
  groupSize?: number | undefined;
  /**
   * Groups (scenarios) per training step.
   * @default 16
   */
  groupsPerStep?: number | undefined;
  /** Train until the model's step reaches this (absolute: a rerun resumes where the model is). */
  maxSteps: number;
  /**
   * How many steps old the policy that sampled a trained group may be. 0 is the synchronous loop
   * (sample, train, sample...); 1 or more lets rollouts for the next steps run while a step
   * trains, and no group trained at step s was sampled before step s - maxStepsOffPolicy. The same
   * bound as `model.train`'s `maxStepsOffPolicy`.
   * @default 1
   */
  maxStepsOffPolicy?: number | undefined;
  /**
   * Stop with `NoLearningSignalError` after this many groups in a row whose rewards are all equal.
   * @default 4 * groupsPerStep
   */
  collapseAfter?: number | undefined;
  /**
   * Validation at the start and every `every` steps (`val/*` rows in the history); `false` for
   * none (with an environment that has an `evalDataset`, validation is on by default).
   * @default on the `environment`'s `evalDataset` when it has one, every 10 steps; else none
   */
  validation?: RLValidationOptions<S> | false | undefined;
  /** Checkpoint retention as the run goes; without it every checkpoint is kept. */
  keep?: RLKeepOptions | undefined;
  /** Limits on steps, wall time and tokens of this run. */
  budget?: RLBudget | undefined;
  /**
   * Options of each gather (rollouts at once, timeouts, retries, exception budget). The trainer's
   * defaults tolerate rollouts that throw (an agent framework's error costs a rollout, not a
   * step): `maxRetries` 1 (a retryable failure is tried once more) and `maxExceptions` 0.25 (a
   * batch, and so its step, fails only when more than a quarter of its rollouts fail for good).
   * `{ maxRetries: 0, maxExceptions: 0 }` is the strict gather, where one failure fails the step.
   */
  gather?:
    | Pick<GatherOptions<S>, 'concurrency' | 'timeout' | 'maxRetries' | 'retryDelay' | 'maxExceptions'>
    | undefined;
  /**
   * A group whose rollouts failed trains on the ones that finished when at least this many
   * remain (Tinker's minimum viable group); with fewer it is left out of the step
   * (`groups:dropped`, `reason: 'failed_rollouts'`).
   * @default min(2, groupSize)
   */
  minGroupSize?: number | undefined;
  /**
   * The learning rate of each step: a number, or a function of the step being trained
   * (`constantLearningRate`, `withWarmup`, `linearDecay`, `cosineDecay`, or your own). Sent in
   * each training job's `experimental_config.learning_rate`; wins over `train.learningRate`.
   * @default `train.learningRate`, else the backend's default
   */
  learningRate?: number | LearningRateSchedule | undefined;
  /**
   * The training parameters of each step's job, as `model.train`'s second argument (learning
   * rate, loss, `config`...). The staleness bound is the trainer's `maxStepsOffPolicy`.
   */
  train?: Omit<TrainParams, 'maxStepsOffPolicy' | 'log'> | undefined;
  /**
   * The request options of each step's job, as `model.train`'s third argument: `timeout`,
   * `pollInterval`, `onProgress`. The run's `signal` stops the run (a job under way is followed to
   * its end so that its step is recorded).
   */
  job?: Omit<JobOptions, 'signal'> | undefined;
  /**
   * A progress line per step: `true` writes to stderr, a stream writes there, `false` is silent.
   * @default stderr when it is a terminal, else silent
   */
  progress?: boolean | ProgressStream | undefined;
}

/** Options of {@link RLTrainer.run}. */
export interface RLRunOptions {
  /**
   * Stops the run: sampling stops at once, a running training job is followed to its end (the
   * service has no cancel) and its step recorded, logs are flushed, and `run` rejects with
   * `APIUserAbortError` (its `cause` is the reason).
   */
  signal?: AbortSignal | undefined;
}

/** Why a run ended. */
export type RLStopReason = 'max_steps' | 'budget_steps' | 'budget_seconds' | 'budget_tokens' | 'scenarios_exhausted';

/** What {@link RLTrainer.run} resolves with. */
export interface RLTrainerSummary {
  /** The model's step at the end. */
  readonly step: number;
  /** The step the run started from. */
  readonly startStep: number;
  /** Why it ended. */
  readonly stopReason: RLStopReason;
  /** The best step by the keep metric (default `val/reward`) in the history, or null when none has it. */
  readonly bestStep: number | null;
  /** The metric's value at `bestStep`, or null. */
  readonly bestMetric: number | null;
  /** The metric `bestStep` is by. */
  readonly metric: string;
  /** Totals of this run. */
  readonly totals: {
    /** Steps trained. */
    readonly steps: number;
    /** Training rollouts (trajectories) sampled. */
    readonly rollouts: number;
    /** Tokens sampled (training and validation). */
    readonly tokens: number;
    /** Groups left out as too stale. */
    readonly droppedStale: number;
    /** Groups with equal rewards (not uploaded; a batch of only these is skipped). */
    readonly droppedZeroVariance: number;
    /** Training rollouts that failed for good (after retries), each costing that rollout only. */
    readonly failedRollouts: number;
    /** Groups left out because fewer than `minGroupSize` of their rollouts finished. */
    readonly droppedFailed: number;
    /** Batches skipped because no group had a learning signal. */
    readonly skippedBatches: number;
  };
  /** Wall time of the run, in milliseconds. */
  readonly elapsedMs: number;
}

/**
 * A step is about to train. One step number everywhere: `step` is the step a batch trains at (the
 * model's step before the update; its checkpoint will be `step + 1`), the number its history row,
 * its logged groups, the service's history, `policyloop history` and the dashboard carry. With
 * `maxStepsOffPolicy` >= 1 the batch may have been sampled earlier: that is `sampledStep`.
 */
export interface StepStartEvent {
  /** The step being trained (its checkpoint will be `step + 1`). */
  readonly step: number;
  /** The step the batch was sampled at (its trajectories' `initial_policy_version`), `step` or earlier. */
  readonly sampledStep: number;
  /** Groups in the batch. */
  readonly groups: number;
}

/** A step trained (see {@link StepStartEvent} for the two step numbers). */
export interface StepEndEvent {
  /** The step that trained (the new checkpoint is `step + 1`). */
  readonly step: number;
  /** The step the batch was sampled at (its trajectories' `initial_policy_version`). */
  readonly sampledStep: number;
  /**
   * The step's one row, as `history.jsonl`, `model.history()`, the service's step metrics, the
   * dashboard and `policyloop history` hold it: the groups' (`train/reward`,
   * `train/frac_reward_zero_std`, ...), the job's (`train/loss`, ...), the batch's
   * (`groups/dropped_stale`, `groups/dropped_failed`, `groups/dropped_zero_variance`,
   * `rollouts/failed`: rollouts that failed for good, kept in their groups' `exceptions`) and the
   * loop's: `time/sample` (s, sampling this batch), `time/train` (s, the job), `time/step` (s,
   * since the previous step ended), `idle/service` (s, the service had no job before this one)
   * and `rollouts/retried` (failed attempts that were retried). See docs/training.md.
   */
  readonly metrics: Readonly<Record<string, number>>;
}

/** A validation was logged. */
export interface ValidationEndEvent {
  /** The step validated (the checkpoint sampled from). */
  readonly step: number;
  /** The model validated: the trained model's name, or a baseline's. */
  readonly model: string;
  /** Its `val/*` metrics. */
  readonly metrics: Readonly<Record<string, number>>;
}

/** A training rollout failed (threw, timed out, or its reward threw). */
export interface RLRolloutFailedEvent {
  /** The step the rollout sampled from (its `initial_policy_version`). */
  readonly sampledStep: number;
  /** Which group of the batch. */
  readonly groupIndex: number;
  /** Which rollout of its group. */
  readonly index: number;
  /** Which attempt (0 for the first). */
  readonly attempt: number;
  /** What it threw. */
  readonly error: unknown;
  /** Whether it is tried again; when not, it is kept in its group's `exceptions`. */
  readonly willRetry: boolean;
}

/** Events of an {@link RLTrainer}. */
export interface RLTrainerEvents {
  /** A training rollout failed: retried, or kept in its group's `exceptions`. */
  'rollout:failed': [event: RLRolloutFailedEvent];
  /** A step is about to train. */
  'step:start': [event: StepStartEvent];
  /** A step trained, with its metrics. */
  'step:end': [event: StepEndEvent];
  /** Groups were left out of training. */
  'groups:dropped': [event: GroupsDroppedEvent];
  /** A validation (of the model or a baseline) was logged. */
  'validation:end': [event: ValidationEndEvent];
}

/** `T` with the options of `Keys` given: their defaults applied. */
type WithDefaults<T, Keys extends keyof T> = Omit<T, Keys> & { readonly [K in Keys]-?: Exclude<T[K], undefined> };

/**
 * The trainer's options, checked, with defaults (what an {@link RLTrainer} run reads). It is the
 * options type itself with the defaulted ones filled in, so a new option is declared once, in
 * {@link RLTrainerOptions} (and its schema beside `RLTrainer`).
 */
export type TrainerConfig<S> = Readonly<
  WithDefaults<
    Omit<RLTrainerOptions<S>, 'validation' | 'keep'>,
    'groupSize' | 'groupsPerStep' | 'maxStepsOffPolicy' | 'collapseAfter' | 'minGroupSize'
  > & {
    readonly validation?:
      | Readonly<WithDefaults<RLValidationOptions<S>, 'every' | 'groupSize' | 'baselines'>>
      | false
      | undefined;
    readonly keep?: Readonly<WithDefaults<RLKeepOptions, 'best' | 'latest' | 'metric'>> | undefined;
  }
>;

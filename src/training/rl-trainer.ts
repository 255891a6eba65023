/**
 * The RL loop as one call: sample groups, train, validate, keep the best checkpoints, repeat,
 * with rollouts for later steps running while a step trains (within a staleness bound), and
 * resuming from the model's step after a crash.
 */
import { EventEmitter } from 'eventemitter3';
import { PolicyloopError, userAbortError } from '../internal/errors.js';
import {
  booleanOption,
  enumOption,
  functionOption,
  integerOption,
  invalidOption,
  numberOption,
  optional,
  optionsObject,
  signalOption,
  stringOption,
} from '../internal/options.js';
import type { RewardSpec } from '../rewards/combine-rewards.js';
import type { GatherOptions, GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { ProgressStream } from '../rollout/progress-bar.js';
import type { RolloutFn } from '../rollout/rollout-function.js';
import type { GroupsDroppedEvent } from './model-events.js';
import { PromptedModel } from './prompted-model.js';
import { RLRun } from './rl-run.js';
import type { LearningRateSchedule } from './schedules.js';
import { TrainableModel } from './trainable-model.js';
import type { TrainOptions } from './trainable-model.js';

export { formatStepLine } from './rl-run.js';

/** Validation of an {@link RLTrainer} run. */
export interface RLValidationOptions<S> {
  /** The held-out scenarios, all rolled out at each validation. */
  scenarios: readonly S[];
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

/** Options of `new RLTrainer(...)`. */
export interface RLTrainerOptions<S> {
  /** The registered model to train. */
  model: TrainableModel;
  /** The training scenarios: an array (cycled) or an iterable or async iterable (read once, in order). */
  scenarios: readonly S[] | Iterable<S> | AsyncIterable<S>;
  /** One rollout of a scenario, as `gatherTrajectoryGroups` takes it. */
  rollout: RolloutFn<S>;
  /** The reward of each trajectory, as `gatherTrajectoryGroups` takes it. */
  reward?: RewardSpec<S> | undefined;
  /** Scores each group as a whole (e.g. `relativeJudge`), as `gatherTrajectoryGroups` takes it. */
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
  /** Validation at the start and every `every` steps (`val/*` rows in the history). */
  validation?: RLValidationOptions<S> | undefined;
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
  /** Options of each `model.train` (learning rate, loss, job timeout...). */
  train?: Omit<TrainOptions, 'signal' | 'maxStepsOffPolicy' | 'maxStaleness' | 'log'> | undefined;
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
  /** The oldest policy version in the batch. */
  readonly oldestPolicyVersion: number;
}

/** A step trained (see {@link StepStartEvent} for the two step numbers). */
export interface StepEndEvent {
  /** The step that trained (the new checkpoint is `step + 1`). */
  readonly step: number;
  /** The step the batch was sampled at (its trajectories' `initial_policy_version`). */
  readonly sampledStep: number;
  /**
   * The step's metrics: `model.train`'s (`train/reward`, `train/frac_reward_zero_std`,
   * `train/loss`, ...) and the loop's: `time/sample` (s, sampling this batch), `time/train` (s,
   * the job), `time/step` (s, since the previous step ended), `idle/service` (s, the service
   * had no job before this one), `rollouts/failed` (rollouts of the batch that failed for good,
   * kept in their groups' `exceptions`), `rollouts/retried` (failed attempts that were retried)
   * and `groups/dropped_failed` (groups left out for too few finished rollouts).
   */
  readonly metrics: Readonly<Record<string, number>>;
}

/** @deprecated Use `GroupsDroppedEvent` (one payload for a model's and a trainer's drops); removed in the next minor version. */
export type RLGroupsDroppedEvent = GroupsDroppedEvent;

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

/** The options, checked, with defaults. */
function checkOptions<S>(options: RLTrainerOptions<S>) {
  optionsObject('options', options);
  if (!(options.model instanceof TrainableModel)) {
    throw invalidOption('model', options.model, 'a registered TrainableModel');
  }
  const scenarios = options.scenarios as unknown;
  const iterable =
    scenarios !== null &&
    typeof scenarios === 'object' &&
    (Symbol.iterator in scenarios || Symbol.asyncIterator in scenarios);
  if (!iterable) throw invalidOption('scenarios', scenarios, 'an array, an iterable or an async iterable of scenarios');
  if (Array.isArray(scenarios) && scenarios.length === 0) {
    throw invalidOption('scenarios', scenarios, 'a non-empty array of scenarios');
  }
  functionOption('rollout', options.rollout);
  optional(options.reward, (reward) => {
    if (typeof reward !== 'object' || reward === null) functionOption('reward', reward);
  });
  optional(options.scoreGroup, (scorer) => functionOption('scoreGroup', scorer));
  const groupSize = integerOption('groupSize', options.groupSize ?? 8, { min: 1 });
  const groupsPerStep = integerOption('groupsPerStep', options.groupsPerStep ?? 16, { min: 1 });
  const maxSteps = integerOption('maxSteps', options.maxSteps, { min: 0 });
  const maxStepsOffPolicy = integerOption('maxStepsOffPolicy', options.maxStepsOffPolicy ?? 1, { min: 0 });
  const collapseAfter = integerOption('collapseAfter', options.collapseAfter ?? 4 * groupsPerStep, { min: 1 });
  const minGroupSize = integerOption('minGroupSize', options.minGroupSize ?? Math.min(2, groupSize), {
    min: 1,
    max: groupSize,
  });
  const learningRate = optional(options.learningRate, (rate) =>
    typeof rate === 'function'
      ? (rate as LearningRateSchedule)
      : numberOption('learningRate', rate, { min: 0, exclusiveMin: true }),
  );
  const validation = optional(options.validation, (value) => {
    const given = optionsObject('validation', value as RLValidationOptions<S>);
    if (!Array.isArray(given.scenarios) || given.scenarios.length === 0) {
      throw invalidOption('validation.scenarios', given.scenarios, 'a non-empty array of scenarios');
    }
    const baselines = given.baselines ?? [];
    if (!Array.isArray(baselines)) throw invalidOption('validation.baselines', baselines, 'an array of PromptedModel');
    baselines.forEach((baseline: unknown, index) => {
      if (!(baseline instanceof PromptedModel) || baseline instanceof TrainableModel) {
        throw invalidOption(`validation.baselines[${index}]`, baseline, 'a PromptedModel');
      }
    });
    return {
      scenarios: given.scenarios as readonly S[],
      every: integerOption('validation.every', given.every ?? 10, { min: 1 }),
      groupSize: integerOption('validation.groupSize', given.groupSize ?? 1, { min: 1 }),
      baselines: baselines as readonly PromptedModel[],
    };
  });
  const keep = optional(options.keep, (value) => {
    const given = optionsObject('keep', value as RLKeepOptions);
    return {
      best: optional(given.best, (best) => booleanOption('keep.best', best)) ?? true,
      latest: optional(given.latest, (latest) => booleanOption('keep.latest', latest)) ?? true,
      metric: optional(given.metric, (metric) => stringOption('keep.metric', metric, true)) ?? 'val/reward',
      direction: optional(given.direction, (direction) => enumOption('keep.direction', direction, ['max', 'min'])),
    };
  });
  const budget = optional(options.budget, (value) => {
    const given = optionsObject('budget', value as RLBudget);
    return {
      steps: optional(given.steps, (steps) => integerOption('budget.steps', steps, { min: 1 })),
      seconds: optional(given.seconds, (seconds) =>
        numberOption('budget.seconds', seconds, { min: 0, exclusiveMin: true, unit: 's' }),
      ),
      tokens: optional(given.tokens, (tokens) => integerOption('budget.tokens', tokens, { min: 1 })),
    };
  });
  optional(options.gather, (gather) => optionsObject('gather', gather as object));
  optional(options.train, (train) => optionsObject('train', train as object));
  const progress = options.progress;
  if (progress !== undefined && typeof progress !== 'boolean') {
    if (typeof (progress as { write?: unknown } | null)?.write !== 'function') {
      throw invalidOption('progress', progress, 'a boolean or a stream with `write`');
    }
  }
  return {
    groupSize,
    groupsPerStep,
    maxSteps,
    maxStepsOffPolicy,
    collapseAfter,
    minGroupSize,
    learningRate,
    validation,
    keep,
    budget,
  };
}

/** The trainer's options, checked, with defaults. */
export type TrainerConfig<S> = ReturnType<typeof checkOptions<S>>;

/**
 * The RL loop: rollouts of `groupsPerStep` scenarios x `groupSize`, rewarded, trained as one step,
 * until the model's step reaches `maxSteps`; validation at the start and every `every` steps;
 * checkpoints kept by `keep`. With `maxStepsOffPolicy` >= 1, rollouts for that many next steps run
 * while a step trains; each trajectory is stamped with the step it samples from, and its requests
 * for the model go to that step (`model.inferenceName(step)`), so a rollout written for
 * `gatherTrajectoryGroups` works unchanged. Groups sampled more than `maxStepsOffPolicy` steps before the step they
 * would train are dropped (`groups:dropped`), batches train stalest first and each group at most
 * once. Groups with equal rewards are not uploaded (counted in `train/frac_reward_zero_std`);
 * after `collapseAfter` of them in a row the run stops with `NoLearningSignalError`. A rollout
 * that throws costs that rollout: retried once, then kept in its group's `exceptions` (the group
 * trains on the rest when `minGroupSize` remain); a step fails only when more than a quarter of
 * its batch fails (`gather.maxExceptions`). `learningRate` takes a number or a schedule of the step.
 * Every event, row and group of a batch carries the step it trains; `sampledStep` the step it
 * was sampled at.
 *
 * Resuming: `run()` starts from the model's step, after finishing the bookkeeping of a step a
 * killed run left under way (`model.finishPendingJob()`), so a crash at any point followed by a
 * rerun leaves exactly one `train/*` history row per trained step, and no step trains twice.
 * @example
 * const trainer = new RLTrainer({
 *   model, scenarios, rollout, reward, groupSize: 8, groupsPerStep: 16, maxSteps: 100,
 *   maxStepsOffPolicy: 1, validation: { scenarios: valScenarios, every: 10 }, keep: { best: true, latest: true },
 * });
 * trainer.on('step:end', ({ step, metrics }) => console.log(step, metrics['train/reward']));
 * const summary = await trainer.run({ signal: AbortSignal.timeout(3_600_000) });
 */
export class RLTrainer<S> extends EventEmitter<RLTrainerEvents> {
  /** The model being trained. */
  readonly model: TrainableModel;
  private readonly options: RLTrainerOptions<S>;
  private readonly config: TrainerConfig<S>;
  private running = false;

  /** @throws {InvalidArgumentError} for a bad option, before anything runs. */
  constructor(options: RLTrainerOptions<S>) {
    super();
    this.config = checkOptions(options);
    this.options = options;
    this.model = options.model;
  }

  /**
   * Runs the loop until `maxSteps` (or a budget limit, or exhausted iterable scenarios), and
   * resolves with the {@link RLTrainerSummary}. Rejects with `NoLearningSignalError` on collapse,
   * with `APIUserAbortError` when `signal` aborts, or with the first error of a rollout batch,
   * validation or training job; in every case nothing is left running or pending when it settles.
   * @example
   * const { step, bestStep, stopReason } = await trainer.run();
   */
  async run(runOptions: RLRunOptions = {}): Promise<RLTrainerSummary> {
    optionsObject('options', runOptions);
    const signal = optional(runOptions.signal, (value) => signalOption('signal', value));
    if (this.running) throw new PolicyloopError('This RLTrainer is already running; await its run() first.');
    if (signal?.aborted) throw userAbortError(signal, 'The run');
    this.running = true;
    try {
      const host = { options: this.options, config: this.config, events: this, stream: this.progressStream() };
      return await new RLRun(host, this.model, signal).execute();
    } finally {
      this.running = false;
    }
  }

  private progressStream(): ProgressStream | undefined {
    const progress = this.options.progress;
    if (progress === false) return undefined;
    if (progress === true) return process.stderr;
    if (progress !== undefined) return progress;
    return process.stderr.isTTY ? process.stderr : undefined;
  }
}

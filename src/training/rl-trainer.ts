/**
 * The RL loop as one call: sample groups, train, validate, keep the best checkpoints, repeat,
 * with rollouts for later steps running while a step trains (within a staleness bound), and
 * resuming from the model's step after a crash.
 */
import { setMaxListeners } from 'node:events';
import { EventEmitter } from 'eventemitter3';
import { abortReason, raceSignal } from '../internal/delay.js';
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
import { dropStaleGroups } from '../rollout/drop-stale-groups.js';
import { GatherEmitter } from '../rollout/gather-events.js';
import { gatherTrajectoryGroups } from '../rollout/gather-trajectory-groups.js';
import type { GatherOptions, GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { ProgressStream } from '../rollout/progress-bar.js';
import type { RolloutFn } from '../rollout/rollout-function.js';
import type { TrajectoryGroup } from '../schema/index.js';
import { NoLearningSignalError } from './errors.js';
import { metricByStep } from './history.js';
import { baselineRoute, PromptedModel } from './prompted-model.js';
import { learningRateAt, type LearningRateSchedule } from './schedules.js';
import { runWithPinnedSteps } from './step-pin.js';
import type { StepRoute } from './step-pin.js';
import { TrainableModel } from './trainable-model.js';
import type { TrainOptions } from './trainable-model.js';
import { hasZeroRewardVariance } from './training-input.js';

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
   * (sample, train, sample...); k >= 1 lets rollouts for the next steps run while a step trains,
   * and no group trained at step s was sampled before step s - k.
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
  train?: Omit<TrainOptions, 'signal' | 'maxStaleness' | 'log'> | undefined;
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

/** Groups were left out of training. */
export interface RLGroupsDroppedEvent {
  /**
   * Stale (sampled more than `maxStepsOffPolicy` steps before), equal rewards (no gradient), or
   * too few rollouts finished (fewer than `minGroupSize`).
   */
  readonly reason: 'stale' | 'zero_variance' | 'failed_rollouts';
  /** How many. */
  readonly count: number;
  /** The step they were to train. */
  readonly step: number;
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
  'groups:dropped': [event: RLGroupsDroppedEvent];
  /** A validation (of the model or a baseline) was logged. */
  'validation:end': [event: ValidationEndEvent];
}

interface SampledBatch {
  readonly groups: TrajectoryGroup[];
  readonly version: number;
  readonly seconds: number;
  /** Rollouts that failed for good, and failed attempts retried. */
  readonly failed: number;
  readonly retried: number;
}

interface PendingBatch {
  readonly version: number;
  readonly promise: Promise<SampledBatch>;
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
      if (!(baseline instanceof PromptedModel)) {
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

/** Reads scenarios in order: an array cycled from an offset, or an (async) iterable once. */
class ScenarioSource<S> {
  private readonly array: readonly S[] | undefined;
  private iterator: Iterator<S> | AsyncIterator<S> | undefined;
  private offset: number;
  private done = false;

  constructor(scenarios: readonly S[] | Iterable<S> | AsyncIterable<S>, offset: number) {
    this.offset = offset;
    if (Array.isArray(scenarios)) this.array = scenarios as readonly S[];
    else if (Symbol.asyncIterator in (scenarios as object)) {
      this.iterator = (scenarios as AsyncIterable<S>)[Symbol.asyncIterator]();
    } else this.iterator = (scenarios as Iterable<S>)[Symbol.iterator]();
  }

  /** Up to `count` next scenarios (fewer, or none, once an iterable is exhausted). */
  async take(count: number): Promise<S[]> {
    if (this.array !== undefined) {
      const array = this.array;
      const taken = Array.from({ length: count }, (_unused, index) => array[(this.offset + index) % array.length] as S);
      this.offset = (this.offset + count) % array.length;
      return taken;
    }
    const taken: S[] = [];
    while (!this.done && taken.length < count && this.iterator !== undefined) {
      const next = await this.iterator.next();
      if (next.done === true) this.done = true;
      else taken.push(next.value);
    }
    return taken;
  }
}

const seconds = (from: number, to: number = performance.now()): number => (to - from) / 1000;

/**
 * The RL loop: rollouts of `groupsPerStep` scenarios x `groupSize`, rewarded, trained as one step,
 * until the model's step reaches `maxSteps`; validation at the start and every `every` steps;
 * checkpoints kept by `keep`. With `maxStepsOffPolicy` k >= 1, rollouts for the next k steps run
 * while a step trains; each trajectory is stamped with the step it samples from, and its requests
 * for the model go to that step (`model.inferenceName(step)`), so a rollout written for
 * `gatherTrajectoryGroups` works unchanged. Groups sampled more than k steps before the step they
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
  private readonly config: ReturnType<typeof checkOptions<S>>;
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
    const { model } = this;
    const { groupSize, groupsPerStep, maxSteps, maxStepsOffPolicy: k, collapseAfter, minGroupSize } = this.config;
    const { validation, keep, budget } = this.config;
    const started = performance.now();
    const stream = this.progressStream();

    // Stops sampling and validation at once (abort, stop, or a failure).
    const stopper = new AbortController();
    setMaxListeners(Number.POSITIVE_INFINITY, stopper.signal);
    const onAbort = (): void => stopper.abort(abortReason(signal));
    // Stops the training batches only (at the end of a run, validations still finish).
    const sampling = new AbortController();
    setMaxListeners(Number.POSITIVE_INFINITY, sampling.signal);
    stopper.signal.addEventListener('abort', () => sampling.abort(stopper.signal.reason), { once: true });
    signal?.addEventListener('abort', onAbort, { once: true });

    const totals = {
      steps: 0,
      rollouts: 0,
      tokens: 0,
      droppedStale: 0,
      droppedZeroVariance: 0,
      failedRollouts: 0,
      droppedFailed: 0,
      skippedBatches: 0,
    };
    const onTokens = (tokens: number): void => {
      totals.tokens += tokens;
    };
    const queue: PendingBatch[] = [];
    const background = new Set<Promise<unknown>>();
    const validating = new Set<number>();
    let failure: { error: unknown } | undefined;
    const track = (promise: Promise<unknown>): void => {
      const settled = promise.then(
        () => undefined,
        (error: unknown) => {
          if (!stopper.signal.aborted) failure ??= { error };
          stopper.abort(error);
        },
      );
      background.add(settled);
      void settled.finally(() => background.delete(settled));
    };
    const throwFailure = (): void => {
      if (failure !== undefined) throw failure.error;
    };

    let latest = 0;
    /** A batch is taken (waited for, checked or training): it trains before any launched now. */
    let training = false;
    let exhausted = false;
    let stopSampling = false;
    let stopReason: RLStopReason = 'max_steps';
    let filling: Promise<void> | undefined;
    try {
      await raceSignal(model.finishPendingJob({ signal: stopper.signal }), stopper.signal);
      latest = await model.getStep({ signal: stopper.signal });
      const startStep = latest;
      const source = new ScenarioSource(this.options.scenarios, startStep * groupsPerStep);
      const inferenceName = model.inferenceName();

      const gather = (
        scenarios: readonly S[],
        size: number,
        version: number,
        route: StepRoute,
        gatherSignal: AbortSignal,
        events?: GatherEmitter<S>,
      ): Promise<TrajectoryGroup[]> =>
        runWithPinnedSteps({ routes: new Map([[inferenceName, route]]), onTokens }, () =>
          gatherTrajectoryGroups(scenarios, this.options.rollout, {
            // A rollout that throws costs that rollout: retried once, then kept in its group.
            maxRetries: 1,
            maxExceptions: 0.25,
            ...this.options.gather,
            ...(events === undefined ? {} : { events }),
            groupSize: size,
            ...(this.options.reward === undefined ? {} : { reward: this.options.reward }),
            ...(this.options.scoreGroup === undefined ? {} : { scoreGroup: this.options.scoreGroup }),
            policyVersion: () => version,
            signal: gatherSignal,
          }),
        );

      const validate = (step: number): void => {
        if (validation === undefined) return;
        validating.add(step);
        const work = async (): Promise<void> => {
          try {
            const groups = await gather(validation.scenarios, validation.groupSize, step, { step }, stopper.signal);
            const row = await model.log(groups, { split: 'val', step });
            this.emit('validation:end', { step, model: model.name, metrics: numericMetrics(row) });
          } finally {
            validating.delete(step);
          }
          await this.prune(latest, queue, validating, false);
        };
        track(work());
      };
      const validateBaselines = (): void => {
        for (const baseline of validation?.baselines ?? []) {
          const work = async (): Promise<void> => {
            const groups = await gather(
              validation?.scenarios ?? [],
              validation?.groupSize ?? 1,
              startStep,
              baselineRoute(baseline),
              stopper.signal,
            );
            const row = await baseline.log(groups, { split: 'val', step: startStep });
            this.emit('validation:end', { step: startStep, model: baseline.name, metrics: numericMetrics(row) });
          };
          track(work());
        }
      };

      // Launches batches while the bound allows: a batch launched now trains no earlier than
      // after the ones ahead of it (queued, and the one training), so at most k of those.
      const fill = (): Promise<void> => {
        filling ??= launch().finally(() => {
          filling = undefined;
        });
        return filling;
      };
      const launch = async (): Promise<void> => {
        for (;;) {
          const ahead = queue.length + (training ? 1 : 0);
          const stepsLeft = maxSteps - latest;
          if (stopSampling || exhausted || stopper.signal.aborted || ahead > k || ahead >= stepsLeft) return;
          const scenarios = await source.take(groupsPerStep);
          // An async iterable may have taken a while: nothing starts once the run is ending.
          if (stopSampling || stopper.signal.aborted) return;
          if (scenarios.length === 0) {
            exhausted = true;
            return;
          }
          const version = latest;
          const startedAt = performance.now();
          const counts = { failed: 0, retried: 0 };
          const events = new GatherEmitter<S>();
          events.on('rollout:error', ({ groupIndex, index, attempt, error, willRetry }) => {
            if (willRetry) counts.retried += 1;
            else counts.failed += 1;
            this.emit('rollout:failed', { sampledStep: version, groupIndex, index, attempt, error, willRetry });
          });
          const promise = gather(scenarios, groupSize, version, { step: version }, sampling.signal, events).then(
            (groups) => ({ groups, version, seconds: seconds(startedAt), ...counts }),
          );
          promise.catch(() => undefined);
          queue.push({ version, promise });
        }
      };

      // A rerun does not validate a step again.
      const validated = (await model.history()).some(
        (row) => row.training_step === latest && Object.keys(row).some((name) => name.startsWith('val/')),
      );
      if (!validated) validate(latest);
      validateBaselines();
      let consecutiveFlat = 0;
      let lastStepEnd = performance.now();
      let lastTrainEnd = started;
      while (latest < maxSteps) {
        throwFailure();
        if (stopper.signal.aborted) break;
        const limit = this.budgetReached(budget, totals, started);
        if (limit !== undefined) {
          stopReason = limit;
          break;
        }
        while (queue.length === 0 && !exhausted && !stopper.signal.aborted) await fill();
        throwFailure();
        if (stopper.signal.aborted) break;
        const next = queue.shift();
        if (next === undefined) {
          stopReason = 'scenarios_exhausted';
          break;
        }
        // The batch taken counts as ahead of any launched from now until its step has trained.
        training = true;
        const batch = await raceSignal(next.promise, stopper.signal);
        const step = latest;
        totals.rollouts += batch.groups.reduce((sum, group) => sum + group.trajectories.length, 0);
        totals.failedRollouts += batch.failed;
        const { fresh: current, dropped } = dropStaleGroups(batch.groups, step, k);
        if (dropped.length > 0) {
          totals.droppedStale += dropped.length;
          this.emit('groups:dropped', { reason: 'stale', count: dropped.length, step });
        }
        // A group trains on the rollouts that finished, when enough of them did.
        const fresh = current.filter((group) => group.trajectories.length >= minGroupSize);
        const droppedFailed = current.length - fresh.length;
        if (droppedFailed > 0) {
          totals.droppedFailed += droppedFailed;
          this.emit('groups:dropped', { reason: 'failed_rollouts', count: droppedFailed, step });
        }
        let flat = 0;
        for (const group of fresh) {
          if (hasZeroRewardVariance(group)) {
            flat += 1;
            consecutiveFlat += 1;
            if (consecutiveFlat >= collapseAfter) throw new NoLearningSignalError(consecutiveFlat, step);
          } else consecutiveFlat = 0;
        }
        if (flat > 0) {
          totals.droppedZeroVariance += flat;
          this.emit('groups:dropped', { reason: 'zero_variance', count: flat, step });
        }
        if (flat === fresh.length) {
          totals.skippedBatches += 1;
          training = false;
          continue;
        }
        // Stalest first: the queue is in launch order, so versions ascend.
        void fill();
        this.emit('step:start', {
          step,
          sampledStep: batch.version,
          groups: fresh.length,
          oldestPolicyVersion: batch.version,
        });
        const trainStart = performance.now();
        const idle = seconds(lastTrainEnd, trainStart);
        let result: Awaited<ReturnType<TrainableModel['train']>>;
        try {
          // No signal: an abort lets the job finish, so the step's row is written.
          const learningRate =
            this.config.learningRate === undefined
              ? undefined
              : learningRateAt(this.config.learningRate, step, { maxSteps });
          result = await model.train(fresh, {
            ...this.options.train,
            ...(learningRate === undefined ? {} : { learningRate }),
          });
        } finally {
          training = false;
        }
        lastTrainEnd = performance.now();
        latest = result.step;
        totals.steps += 1;
        void fill();
        const metrics: Record<string, number> = {
          ...result.metrics,
          'time/sample': batch.seconds,
          'time/train': seconds(trainStart, lastTrainEnd),
          'time/step': seconds(lastStepEnd, lastTrainEnd),
          'idle/service': idle,
          'rollouts/failed': batch.failed,
          'rollouts/retried': batch.retried,
          'groups/dropped_failed': droppedFailed,
        };
        lastStepEnd = lastTrainEnd;
        this.emit('step:end', { step, sampledStep: batch.version, metrics });
        stream?.write(`${formatStepLine(step, maxSteps, metrics)}\n`);
        if (validation !== undefined && latest % validation.every === 0 && !stopper.signal.aborted) validate(latest);
        if (keep !== undefined) await this.prune(latest, queue, validating, false);
      }
      stopSampling = true;
      if (signal?.aborted) throw userAbortError(signal, 'The run');
      // Rollouts of batches no step will train are stopped; validations are awaited.
      sampling.abort(new PolicyloopError('The run ended: sampling for later steps stopped.'));
      await Promise.all(queue.splice(0).map((pending) => pending.promise.catch(() => undefined)));
      while (background.size > 0) await Promise.all([...background]);
      throwFailure();
      if (signal?.aborted) throw userAbortError(signal, 'The run');
      if (keep !== undefined) await this.prune(latest, [], new Set(), true);
      await model.flushLogs();
      const best = await this.best();
      return {
        step: latest,
        startStep,
        stopReason,
        bestStep: best.step,
        bestMetric: best.value,
        metric: keep?.metric ?? 'val/reward',
        totals: { ...totals },
        elapsedMs: performance.now() - started,
      };
    } catch (error) {
      stopSampling = true;
      stopper.abort(error);
      throw signal?.aborted === true && !(error instanceof NoLearningSignalError)
        ? userAbortError(signal, 'The run')
        : error;
    } finally {
      stopSampling = true;
      if (!stopper.signal.aborted) stopper.abort(new PolicyloopError('The run ended.'));
      await filling;
      await Promise.all(queue.splice(0).map((pending) => pending.promise.catch(() => undefined)));
      while (background.size > 0) await Promise.all([...background]);
      await model.flushLogs().catch(() => undefined);
      signal?.removeEventListener('abort', onAbort);
      this.running = false;
    }
  }

  private budgetReached(
    budget: ReturnType<typeof checkOptions<S>>['budget'],
    totals: { steps: number; tokens: number },
    started: number,
  ): RLStopReason | undefined {
    if (budget === undefined) return undefined;
    if (budget.steps !== undefined && totals.steps >= budget.steps) return 'budget_steps';
    if (budget.seconds !== undefined && seconds(started) >= budget.seconds) return 'budget_seconds';
    if (budget.tokens !== undefined && totals.tokens >= budget.tokens) return 'budget_tokens';
    return undefined;
  }

  /** Deletes checkpoints `keep` does not keep, sparing the ones still sampled from. */
  private async prune(
    latest: number,
    queue: readonly PendingBatch[],
    validating: ReadonlySet<number>,
    final: boolean,
  ): Promise<void> {
    const keep = this.config.keep;
    if (keep === undefined) return;
    const keepBestBy = keep.best ? keep.metric : null;
    if (keepBestBy !== null) {
      // Nothing is deleted before the metric exists at a checkpoint (step >= 1).
      const values = metricByStep(await this.model.history(), keepBestBy);
      if (![...values.keys()].some((step) => step >= 1 && step <= latest)) return;
    }
    await this.model.pruneCheckpoints({
      keepBestBy,
      ...(keep.direction === undefined ? {} : { direction: keep.direction }),
      keepLatest: final ? keep.latest : true,
      keepSteps: [...queue.map((batch) => batch.version), ...validating],
    });
  }

  private async best(): Promise<{ step: number | null; value: number | null }> {
    const metric = this.config.keep?.metric ?? 'val/reward';
    const better =
      this.config.keep?.direction === 'min' ? (a: number, b: number) => a <= b : (a: number, b: number) => a >= b;
    let step: number | null = null;
    let value: number | null = null;
    const values = [...metricByStep(await this.model.history(), metric)].sort(([a], [b]) => a - b);
    // Ties go to the later step, as in checkpoint retention.
    for (const [at, metricValue] of values) {
      if (value === null || better(metricValue, value)) {
        step = at;
        value = metricValue;
      }
    }
    return { step, value };
  }

  private progressStream(): ProgressStream | undefined {
    const progress = this.options.progress;
    if (progress === false) return undefined;
    if (progress === true) return process.stderr;
    if (progress !== undefined) return progress;
    return process.stderr.isTTY ? process.stderr : undefined;
  }
}

function numericMetrics(row: Readonly<Record<string, unknown>>): Record<string, number> {
  const metrics: Record<string, number> = {};
  for (const [name, value] of Object.entries(row))
    if (typeof value === 'number' && name !== 'training_step') metrics[name] = value;
  return metrics;
}

/** The progress line of a step, e.g. `step 3/20  reward 0.412  zero-std 0.25  sample 1.2s  train 0.8s  idle 0.1s`. */
export function formatStepLine(step: number, maxSteps: number, metrics: Readonly<Record<string, number>>): string {
  const value = (name: string, digits: number): string => {
    const number = metrics[name];
    return number === undefined ? '-' : number.toFixed(digits);
  };
  return [
    `step ${step + 1}/${maxSteps}`,
    `reward ${value('train/reward', 3)}`,
    `zero-std ${value('train/frac_reward_zero_std', 2)}`,
    `sample ${value('time/sample', 1)}s`,
    `train ${value('time/train', 1)}s`,
    `idle ${value('idle/service', 1)}s`,
  ].join('  ');
}

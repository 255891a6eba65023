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
import type { ProgressStream } from '../rollout/progress-bar.js';
import { PromptedModel } from './prompted-model.js';
import { RLRun } from './rl-run.js';
import type {
  RLBudget,
  RLKeepOptions,
  RLRunOptions,
  RLTrainerEvents,
  RLTrainerOptions,
  RLTrainerSummary,
  RLValidationOptions,
  TrainerConfig,
} from './rl-types.js';
import type { LearningRateSchedule } from './schedules.js';
import { TrainableModel } from './trainable-model.js';

export { formatStepLine } from './rl-run.js';
export type {
  RLBudget,
  RLKeepOptions,
  RLRolloutFailedEvent,
  RLRunOptions,
  RLStopReason,
  RLTrainerEvents,
  RLTrainerOptions,
  RLTrainerSummary,
  RLValidationOptions,
  StepEndEvent,
  StepStartEvent,
  TrainerConfig,
  ValidationEndEvent,
} from './rl-types.js';

/** The options, checked, with defaults; the checks run in the order the options are documented. */
function checkOptions<S>(options: RLTrainerOptions<S>): TrainerConfig<S> {
  optionsObject('options', options);
  if (!(options.model instanceof TrainableModel)) {
    throw invalidOption('model', options.model, 'a registered TrainableModel');
  }
  checkScenarios(options.scenarios);
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
  const validation = optional(options.validation, (value) => checkValidation(value as RLValidationOptions<S>));
  const keep = optional(options.keep, (value) => checkKeep(value as RLKeepOptions));
  const budget = optional(options.budget, (value) => checkBudget(value as RLBudget));
  optional(options.gather, (gather) => optionsObject('gather', gather as object));
  optional(options.train, (train) => optionsObject('train', train as object));
  optional(options.job, (job) => optionsObject('job', job as object));
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

/** `scenarios`: an array (not empty), an iterable or an async iterable. */
function checkScenarios(scenarios: unknown): void {
  const iterable =
    scenarios !== null &&
    typeof scenarios === 'object' &&
    (Symbol.iterator in scenarios || Symbol.asyncIterator in scenarios);
  if (!iterable) throw invalidOption('scenarios', scenarios, 'an array, an iterable or an async iterable of scenarios');
  if (Array.isArray(scenarios) && scenarios.length === 0) {
    throw invalidOption('scenarios', scenarios, 'a non-empty array of scenarios');
  }
}

/** `validation`, checked, with defaults; a baseline must be a prompted model, not a trained one. */
function checkValidation<S>(value: RLValidationOptions<S>): NonNullable<TrainerConfig<S>['validation']> {
  const given = optionsObject('validation', value);
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
}

/** `keep`, checked, with defaults. */
function checkKeep(value: RLKeepOptions): NonNullable<TrainerConfig<unknown>['keep']> {
  const given = optionsObject('keep', value);
  return {
    best: optional(given.best, (best) => booleanOption('keep.best', best)) ?? true,
    latest: optional(given.latest, (latest) => booleanOption('keep.latest', latest)) ?? true,
    metric: optional(given.metric, (metric) => stringOption('keep.metric', metric, true)) ?? 'val/reward',
    direction: optional(given.direction, (direction) => enumOption('keep.direction', direction, ['max', 'min'])),
  };
}

/** `budget`, checked. */
function checkBudget(value: RLBudget): NonNullable<TrainerConfig<unknown>['budget']> {
  const given = optionsObject('budget', value);
  return {
    steps: optional(given.steps, (steps) => integerOption('budget.steps', steps, { min: 1 })),
    seconds: optional(given.seconds, (seconds) =>
      numberOption('budget.seconds', seconds, { min: 0, exclusiveMin: true, unit: 's' }),
    ),
    tokens: optional(given.tokens, (tokens) => integerOption('budget.tokens', tokens, { min: 1 })),
  };
}

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

/**
 * The RL loop as one call: sample groups, train, validate, keep the best checkpoints, repeat,
 * with rollouts for later steps running while a step trains (within a staleness bound), and
 * resuming from the model's step after a crash.
 */
import { EventEmitter } from 'eventemitter3';
import { z } from 'zod';
import { PolicyloopError, userAbortError } from '../internal/errors.js';
import { invalidOption, option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { ProgressStream } from '../rollout/progress-bar.js';
import { JobRequestShape, refuseUnhonouredObjective, refuseUnofferedLoss, TrainParamsShape } from './job-options.js';
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
  TrainerEnvironment,
  TrainerEnvironmentRun,
  ValidationEndEvent,
} from './rl-types.js';

const positiveInteger = () => option.integer({ min: 1 });

/** `validation`: held-out scenarios (not empty), how often, and prompted baselines. */
const ValidationSchema = optionsSchema<RLValidationOptions<unknown>>()({
  scenarios: option
    .like<readonly unknown[]>((value) => Array.isArray(value) && value.length > 0, 'a non-empty array of scenarios')
    .optional(),
  every: positiveInteger().default(10),
  groupSize: positiveInteger().default(1),
  baselines: z
    .array(
      option.like<PromptedModel>(
        (value) => value instanceof PromptedModel && !(value instanceof TrainableModel),
        'a PromptedModel (a model that is not trained)',
      ),
      { error: 'an array of PromptedModel' },
    )
    .readonly()
    .default([]),
});

/** `keep`: which checkpoints a run keeps. */
const KeepSchema = optionsSchema<RLKeepOptions>()({
  best: option.boolean().default(true),
  latest: option.boolean().default(true),
  metric: option.nonEmptyString().default('val/reward'),
  direction: option.oneOf(['max', 'min']).optional(),
});

/** `budget`: limits of one run. */
const BudgetSchema = optionsSchema<RLBudget>()({
  steps: positiveInteger().optional(),
  seconds: option.number({ min: 0, exclusiveMin: true, unit: 's' }).optional(),
  tokens: positiveInteger().optional(),
});

/** The options as the schema checks them: `validation: false` is taken out first (see {@link checkOptions}). */
type CheckedOptions = Omit<RLTrainerOptions<unknown>, 'validation'> & {
  validation?: RLValidationOptions<unknown> | undefined;
};

const SCENARIOS_EXPECTED = 'a non-empty array, an iterable or an async iterable of scenarios';

/** `new RLTrainer(options)`: each option declared once, checked in the order documented. */
const TrainerSchema = optionsSchema<CheckedOptions>()({
  model: option.like<TrainableModel>((value) => value instanceof TrainableModel, 'a registered TrainableModel'),
  environment: option
    .like<NonNullable<RLTrainerOptions<unknown>['environment']>>(
      (value) =>
        typeof value?.start === 'function' &&
        typeof value?.dataset === 'function' &&
        typeof value?.evalDataset === 'function',
      'an environment (from defineEnvironment or loadEnvironment)',
    )
    .optional(),
  scenarios: option
    .like<NonNullable<RLTrainerOptions<unknown>['scenarios']>>(
      (value) =>
        value !== null &&
        typeof value === 'object' &&
        (Symbol.iterator in value || Symbol.asyncIterator in value) &&
        !(Array.isArray(value) && value.length === 0),
      SCENARIOS_EXPECTED,
    )
    .optional(),
  rollout: option.function<NonNullable<RLTrainerOptions<unknown>['rollout']>>().optional(),
  sampling: z.record(z.string(), z.unknown(), { error: 'an object of request parameters' }).readonly().optional(),
  reward: option
    .like<NonNullable<RLTrainerOptions<unknown>['reward']>>(
      (value) => typeof value === 'function' || (typeof value === 'object' && value !== null),
      'a reward function, or an object of weighted rewards',
    )
    .optional(),
  scoreGroup: option.function<NonNullable<RLTrainerOptions<unknown>['scoreGroup']>>().optional(),
  groupSize: positiveInteger().default(8),
  groupsPerStep: positiveInteger().default(16),
  maxSteps: option.integer({ min: 0 }),
  maxStepsOffPolicy: option.integer({ min: 0 }).default(1),
  collapseAfter: positiveInteger().optional(),
  validation: ValidationSchema.optional(),
  keep: KeepSchema.optional(),
  budget: BudgetSchema.optional(),
  gather: option.options<NonNullable<RLTrainerOptions<unknown>['gather']>>().optional(),
  minGroupSize: positiveInteger().optional(),
  learningRate: option
    .like<number | LearningRateSchedule>(
      (value) => typeof value === 'function' || (typeof value === 'number' && value > 0 && Number.isFinite(value)),
      'a positive number or a schedule (a function of the step)',
    )
    .optional(),
  train: optionsSchema<NonNullable<RLTrainerOptions<unknown>['train']>>()(trainerTrainShape()).optional(),
  job: optionsSchema<NonNullable<RLTrainerOptions<unknown>['job']>>()(trainerJobShape()).optional(),
  progress: option
    .like<boolean | ProgressStream>(
      (value) => typeof value === 'boolean' || typeof (value as { write?: unknown } | null)?.write === 'function',
      'a boolean or a stream with `write`',
    )
    .optional(),
});

/** The training parameters a trainer passes to each step (the staleness bound is its own). */
function trainerTrainShape() {
  const { maxStepsOffPolicy: _bound, log: _log, ...shape } = TrainParamsShape;
  return shape;
}

/** The request options a trainer passes to each step's job (its run's `signal` is its own). */
function trainerJobShape() {
  const { signal: _signal, ...shape } = JobRequestShape;
  return shape;
}

/** `run(options)`. */
const RunOptionsSchema = optionsSchema<RLRunOptions>()({ signal: option.signal().optional() });

/** The options, checked, with defaults (rules across options after the schema). */
function checkOptions<S>(options: RLTrainerOptions<S>): TrainerConfig<S> {
  // `validation: false` turns an environment's validation off; the schema checks the objects.
  const off = (options as { validation?: unknown } | undefined)?.validation === false;
  const given = parseOptions(TrainerSchema, off ? { ...options, validation: undefined } : options);
  if (given.environment === undefined) {
    // Without an environment, the scenarios and the rollout are the script's own.
    const expected = `${SCENARIOS_EXPECTED} (or an \`environment\` that gives them)`;
    if (given.scenarios === undefined) throw invalidOption('scenarios', undefined, expected);
    if (given.rollout === undefined)
      throw invalidOption('rollout', undefined, 'a function (or an `environment` that gives one)');
    if (given.validation !== undefined && given.validation.scenarios === undefined) {
      throw invalidOption(
        'validation.scenarios',
        undefined,
        'a non-empty array of scenarios (or an `environment` with an evalDataset)',
      );
    }
  }
  const { groupSize, groupsPerStep } = given;
  const minGroupSize = given.minGroupSize ?? Math.min(2, groupSize);
  if (minGroupSize > groupSize) {
    throw invalidOption('minGroupSize', minGroupSize, `an integer from 1 to ${groupSize} (the groupSize)`);
  }
  // The schema returns each option as given (scenarios, functions) with the defaults applied.
  return {
    ...given,
    validation: off ? false : given.validation,
    collapseAfter: given.collapseAfter ?? 4 * groupsPerStep,
    minGroupSize,
  } as TrainerConfig<S>;
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
  private readonly config: TrainerConfig<S>;
  private running = false;

  /** @throws {InvalidArgumentError} for a bad option, before anything runs. */
  constructor(options: RLTrainerOptions<S>) {
    super();
    this.config = checkOptions(options);
    this.model = this.config.model;
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
    const { signal } = parseOptions(RunOptionsSchema, runOptions);
    if (this.running) throw new PolicyloopError('This RLTrainer is already running; await its run() first.');
    if (signal?.aborted) throw userAbortError(signal, 'The run');
    // Before the first rollout: a loss the backend lacks would fail only the first step's job.
    if (this.model.isRegistered) {
      refuseUnofferedLoss(this.model.backend, this.config.train?.lossFn, 'train.lossFn');
      refuseUnhonouredObjective(this.model.backend, this.config.train, 'train');
    }
    this.running = true;
    try {
      const host = { config: this.config, events: this, stream: this.progressStream() };
      return await new RLRun(host, this.model, signal).execute();
    } finally {
      this.running = false;
    }
  }

  private progressStream(): ProgressStream | undefined {
    const progress = this.config.progress;
    if (progress === false) return undefined;
    if (progress === true) return process.stderr;
    if (progress !== undefined) return progress;
    return process.stderr.isTTY ? process.stderr : undefined;
  }
}

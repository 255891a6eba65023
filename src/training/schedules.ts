/**
 * Learning-rate schedules for `RLTrainer`: a function of the step being trained, and the usual
 * shapes (constant, warm-up, linear and cosine decay).
 */
import { PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions, parseValue } from '../internal/option-schema.js';

/** What a schedule knows besides the step. */
export interface ScheduleContext {
  /** The run's `maxSteps` (absolute): where a decay ends unless it names its own `steps`. */
  readonly maxSteps: number;
}

/**
 * A learning rate as a function of the step being trained (the model's step before the update,
 * absolute: a run resumed at step 40 asks for step 40). Must return a positive finite number.
 * @example
 * const schedule: LearningRateSchedule = (step) => (step < 10 ? 1e-3 : 5e-4);
 */
export type LearningRateSchedule = (step: number, context: ScheduleContext) => number;

/** Options of {@link linearDecay} and {@link cosineDecay}. */
export interface DecayOptions {
  /** The learning rate at step 0 (> 0). */
  readonly initial: number;
  /**
   * The learning rate at the end of the decay and after it (>= 0; a 0 is raised to 1 % of
   * `initial`, as a training job needs a positive rate).
   * @default initial / 10
   */
  readonly final?: number | undefined;
  /**
   * The step where the decay ends.
   * @default the run's `maxSteps`
   */
  readonly steps?: number | undefined;
}

const PositiveRate = option.number({ min: 0, exclusiveMin: true });

/** The check of {@link DecayOptions}. */
const DecayOptionsSchema = optionsSchema<DecayOptions>()({
  initial: PositiveRate,
  final: option.number({ min: 0 }).optional(),
  steps: option.integer({ min: 1 }).optional(),
});

/** Options of {@link withWarmup}. */
export interface WarmupOptions {
  /**
   * The step the warm-up starts at.
   * @default 0
   */
  readonly from?: number | undefined;
}

/** The check of {@link WarmupOptions}, with the default. */
const WarmupOptionsSchema = optionsSchema<WarmupOptions>()({
  from: option.integer({ min: 0 }).default(0),
});

const WarmupSteps = option.integer({ min: 0 });

/**
 * The same learning rate at every step.
 * @example
 * new RLTrainer({ ..., learningRate: constantLearningRate(5e-3) });
 */
export function constantLearningRate(value: number): LearningRateSchedule {
  parseValue('value', PositiveRate, value);
  return () => value;
}

function decay(name: string, options: DecayOptions, shape: (fraction: number) => number): LearningRateSchedule {
  const checked = parseOptions(DecayOptionsSchema, options, { name, prefixed: true });
  const { initial, steps } = checked;
  const final = checked.final ?? initial / 10;
  const floor = final > 0 ? final : initial / 100;
  return (step, context) => {
    const horizon = steps ?? Math.max(1, context.maxSteps);
    const fraction = Math.min(1, Math.max(0, step / horizon));
    return Math.max(floor, final + (initial - final) * shape(fraction));
  };
}

/**
 * Decays linearly from `initial` at step 0 to `final` at `steps` (default the run's `maxSteps`),
 * then stays there.
 * @example
 * linearDecay({ initial: 5e-3, final: 1.5e-3 }) // the AI SDK agent's schedule
 */
export function linearDecay(options: DecayOptions): LearningRateSchedule {
  return decay('linearDecay', options, (fraction) => 1 - fraction);
}

/**
 * Decays along half a cosine from `initial` at step 0 to `final` at `steps` (default the run's
 * `maxSteps`), then stays there.
 * @example
 * cosineDecay({ initial: 5e-3, final: 5e-4 })
 */
export function cosineDecay(options: DecayOptions): LearningRateSchedule {
  return decay('cosineDecay', options, (fraction) => (1 + Math.cos(Math.PI * fraction)) / 2);
}

/**
 * A linear warm-up over the first `steps` steps of the run (counted from `from`, the step the
 * warm-up starts at, default 0), up to what `then` gives (a number or a schedule), then `then`.
 * At step `from + i` (i < steps) the rate is `then(step) * (i + 1) / (steps + 1)`.
 * @example
 * withWarmup(5, cosineDecay({ initial: 5e-3 })) // 5 steps of warm-up, then the cosine decay
 */
export function withWarmup(
  steps: number,
  then: number | LearningRateSchedule,
  options?: WarmupOptions,
): LearningRateSchedule {
  parseValue('steps', WarmupSteps, steps);
  const { from } = parseOptions(WarmupOptionsSchema, options);
  const target =
    typeof then === 'number'
      ? constantLearningRate(then)
      : parseValue('then', option.function<LearningRateSchedule>(), then);
  return (step, context) => {
    const value = target(step, context);
    const into = step - from;
    return into >= 0 && into < steps ? (value * (into + 1)) / (steps + 1) : value;
  };
}

/**
 * The learning rate a schedule gives at `step`, checked: a schedule that throws or returns
 * something other than a positive finite number fails the step with a `PolicyloopError` that
 * says what came.
 * @example
 * learningRateAt(linearDecay({ initial: 1e-3 }), 5, { maxSteps: 10 }); // 5.5e-4
 */
export function learningRateAt(
  schedule: number | LearningRateSchedule,
  step: number,
  context: ScheduleContext,
): number {
  if (typeof schedule === 'number') return schedule;
  let value: unknown;
  try {
    value = schedule(step, context);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new PolicyloopError(`The learning-rate schedule threw at step ${step}: ${message}`, { cause: error });
  }
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new PolicyloopError(
      `Expected the learning-rate schedule to return a positive number at step ${step}, got ${String(value)}`,
    );
  }
  return value;
}

/**
 * The options of a training call, declared once: the training parameters of `train` and
 * `trainSFT` (their second argument) and the request options of a call that follows its job
 * (their third). The TypeScript types are the interfaces in `backend.ts`; these shapes are their
 * checks, held to them by the compiler, and `RLTrainer`'s `train` and `job` options reuse them.
 */
import { InvalidArgumentError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions, parseValue } from '../internal/option-schema.js';
import { type ExperimentalTrainingConfig, LossFn, type SFTTrainingConfigInput } from '../schema/index.js';
import type { Backend, JobOptions, SFTParams, TrainParams, WaitOptions } from './backend.js';
import { checkFollowJobOptions, followJobShape } from './follow-job.js';
import { ObjectiveParamsShape, setObjectiveParams } from './objective-params.js';

const positive = () => option.number({ min: 0, exclusiveMin: true });

/** A call that only waits: `{ signal }`. */
export const WaitShape = { signal: followJobShape.signal };

/**
 * The request options of a call that follows a job (`train`'s and `trainSFT`'s third argument):
 * `followTrainingJob`'s options, declared there once.
 */
export const JobRequestShape = followJobShape;

/** `train`'s training parameters. */
export const TrainParamsShape = {
  learningRate: positive().optional(),
  lossFn: option.oneOf(LossFn.options as [LossFn, ...LossFn[]]).optional(),
  config: option.options<Partial<ExperimentalTrainingConfig>>().optional(),
  allowTrainingWithoutLogprobs: option.boolean().optional(),
  maxStepsOffPolicy: option.number({ min: 0, allowInfinity: true, unit: 'steps' }).optional(),
  log: option.boolean().optional(),
  ...ObjectiveParamsShape,
};

/** `trainSFT`'s training parameters. */
const SFTParamsShape = {
  // Each rate of an array is checked by its index in `checkSFTParams`.
  learningRate: option
    .like<number | number[]>(
      (value) => (typeof value === 'number' && value > 0 && Number.isFinite(value)) || Array.isArray(value),
      'a positive number, or an array of them (one per batch)',
    )
    .optional(),
  batchSize: option
    .like<number | 'auto'>(
      (value) => value === 'auto' || (Number.isInteger(value) && (value as number) >= 1),
      "an integer >= 1 or 'auto'",
    )
    .optional(),
  assistantTurns: option.oneOf(['all', 'last']).optional(),
  trainingDataUrl: option.nonEmptyString().optional(),
  config: option.options<Partial<SFTTrainingConfigInput>>().optional(),
};

const WaitSchema = optionsSchema<WaitOptions>()(WaitShape);
const TrainParamsSchema = optionsSchema<TrainParams>()(TrainParamsShape);
const SFTParamsSchema = optionsSchema<SFTParams>()(SFTParamsShape);

/** Checks `{ signal }` of a call that only waits; a bad one throws before any request. */
export function checkWaitOptions(options: WaitOptions | undefined): WaitOptions {
  return parseOptions(WaitSchema, options);
}

/** Checks the request options of a call that follows a job (`followTrainingJob`'s check). */
export function checkJobOptions(options: JobOptions | undefined): JobOptions {
  checkFollowJobOptions(options ?? {});
  return options ?? {};
}

/**
 * Checks `train`'s parameters; a request option among them is refused naming its place, the
 * third argument.
 */
export function checkTrainParams(params: TrainParams | undefined): TrainParams {
  refuseRequestOptions(params);
  return parseOptions(TrainParamsSchema, params, { name: 'params' });
}

/** Checks `trainSFT`'s parameters, as {@link checkTrainParams} does `train`'s. */
export function checkSFTParams(params: SFTParams | undefined): SFTParams {
  refuseRequestOptions(params);
  const checked = parseOptions(SFTParamsSchema, params, { name: 'params' });
  const rates = checked.learningRate;
  if (Array.isArray(rates)) rates.forEach((rate, index) => parseValue(`learningRate[${index}]`, positive(), rate));
  return checked;
}

/** "Unknown option `params.timeout`: `timeout` is a request option, the third argument (`{ timeout }`)". */
function refuseRequestOptions(params: object | undefined): void {
  if (params === null || typeof params !== 'object') return;
  for (const name of Object.keys(JobRequestShape)) {
    if (Object.hasOwn(params, name)) {
      throw new InvalidArgumentError(
        `params.${name}`,
        `Unknown option \`params.${name}\`: \`${name}\` is a request option, the third argument (\`{ ${name} }\`)`,
      );
    }
  }
}

/**
 * Refuses a `lossFn` the backend does not train with ({@link Backend.lossFns}), before anything is
 * sampled or sent: `train` checks its params, `RLTrainer.run` its `train` option at the start.
 * A backend that lists none is not checked.
 * @example
 * refuseUnofferedLoss(new HostedBackend(), 'importance_sampling', 'params.lossFn'); // throws InvalidArgumentError
 */
export function refuseUnofferedLoss(backend: Backend, lossFn: TrainParams['lossFn'], argument: string): void {
  const offered = backend.lossFns;
  if (lossFn === undefined || offered === undefined || offered.includes(lossFn)) return;
  throw new InvalidArgumentError(
    argument,
    `Expected \`${argument}\` to be a loss the ${backend.kind} backend trains with (${offered.map((name) => `'${name}'`).join(', ')}), got '${lossFn}': ${backendName(backend.kind)} has no ${lossFn} loss.`,
  );
}

/**
 * Refuses the objective's typed parameters the backend does not honour ({@link Backend.objectiveParams}),
 * then whatever else of the step's parameters it says it cannot honour
 * ({@link Backend.trainParamsProblem}: a clip with a loss that has none, a raw `config` key),
 * before anything is sampled or sent, naming the parameter and the backend. A backend that lists
 * none honours them all.
 * @example
 * refuseUnhonouredObjective(new TinkerBackend(), { importanceSamplingLevel: 'sequence' }, 'params'); // throws InvalidArgumentError
 */
export function refuseUnhonouredObjective(backend: Backend, params: TrainParams | undefined, argument: string): void {
  if (params === undefined) return;
  const honoured = backend.objectiveParams;
  const first =
    honoured === undefined ? undefined : setObjectiveParams(params).find((name) => !honoured.includes(name));
  if (first === undefined || honoured === undefined) {
    const problem = backend.trainParamsProblem?.(params, argument);
    if (problem !== undefined) throw new InvalidArgumentError(`${argument}.${problem.parameter}`, problem.message);
    return;
  }
  throw new InvalidArgumentError(
    `${argument}.${first}`,
    `Expected \`${argument}.${first}\` to be left out: ${backendName(backend.kind)} does not honour it (it honours ${honoured.length > 0 ? honoured.map((name) => `\`${name}\``).join(', ') : 'none of the objective parameters'}), and training would silently ignore it.`,
  );
}

function backendName(kind: Backend['kind']): string {
  return kind === 'local' ? 'the local engine' : kind === 'hosted' ? 'the hosted service' : 'a Tinker server';
}

/**
 * `evaluate(environment, options)`: a model measured on the first tasks of an environment's
 * `evalDataset`, several rollouts each, through `gatherTrajectoryGroups` (one group per task).
 * A rollout, a rubric function or the group judge that throws makes an error row, counted, never
 * a stopped run. With a folder, each finished group's rows are appended to `results.jsonl` (in one
 * write) and `metadata.json` is rewritten (atomically) as soon as the group ends, so a run killed
 * at any moment can be finished with `resume`: complete groups are kept and never rerun.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { mkdir, readdir, stat } from 'node:fs/promises';
// Node's own, not the global a test's fake timers replace.
import { setImmediate } from 'node:timers';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { isPromiseLike } from '../internal/delay.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { RewardFunctionError } from '../rewards/reward-errors.js';
import type { RewardFn } from '../rewards/reward-function.js';
import { describeValue } from '../internal/describe-value.js';
import { GatherEmitter } from '../rollout/gather-events.js';
import { gatherTrajectoryGroups, type GroupScorer } from '../rollout/gather-trajectory-groups.js';
import { messageOf, type Trajectory } from '../schema/index.js';
import type { PromptedModel } from '../training/prompted-model.js';
import type { TrainableModel } from '../training/trainable-model.js';
import type { Environment, EnvironmentRun } from './environment.js';
import {
  completeGroups,
  type EvaluationMetadata,
  type EvaluationNumbers,
  type EvaluationRow,
  type EvaluationSettings,
  metadataOf,
  readEvaluation,
  RESULTS_FILE,
  rowLines,
  RowSummary,
  summarizeRows,
  writeFileAtomically,
  writeMetadata,
  writeMetadataSync,
} from './eval-files.js';

/** How far an evaluation is, after each rollout (`onProgress`). */
export interface EvaluationProgress {
  /** Rollouts done, those of a resumed run's kept groups included. */
  readonly done: number;
  /** Rollouts in all (tasks x rollouts per example). */
  readonly total: number;
  /** Error rows so far. */
  readonly errors: number;
  /** Mean reward of the rollouts done without error (NaN before the first). */
  readonly rewardMean: number;
  /** Groups (tasks) finished. */
  readonly groupsDone: number;
  /** Groups in all. */
  readonly groupsTotal: number;
}

/** Options of {@link evaluate}. */
export interface EvaluateOptions {
  /** The model the rollouts call (`context.model`): a `PromptedModel` or a `TrainableModel`. */
  model: PromptedModel | TrainableModel;
  /**
   * How many tasks: the first `examples` of `evalDataset`, in order.
   * @default every task (on `resume`: the run's)
   */
  examples?: number | undefined;
  /**
   * Rollouts of each task (pass@k is reported for k = 1, 2, 4, ... up to it).
   * @default 1 (on `resume`: the run's)
   */
  rolloutsPerExample?: number | undefined;
  /**
   * Rollouts in flight at once.
   * @default 8
   */
  concurrency?: number | undefined;
  /**
   * Request parameters every model call gets (`{ temperature: 0, max_tokens: 256 }`), handed to
   * `environment.start` as `sampling` (over the environment's own `sampling`, key by key; the
   * metadata records the two merged).
   * @default {} (on `resume`: the run's)
   */
  sampling?: Readonly<Record<string, unknown>> | undefined;
  /**
   * A rollout is correct (for pass@k and pass^k) when it has no error and its reward >= threshold.
   * @default 0.5 (on `resume`: the run's)
   */
  threshold?: number | undefined;
  /**
   * A folder to write `results.jsonl` and `metadata.json` to, after every group; created when
   * missing; refused when it already holds an evaluation (finish that one with `resume`).
   */
  out?: string | undefined;
  /**
   * The folder of an interrupted evaluation to finish: its complete groups are kept (never rerun),
   * partial groups and a torn last line are dropped. `examples`, `rolloutsPerExample`, `sampling`,
   * `threshold` and `envId` default to the run's; given, they must match it, as must the model and
   * the environment's `args`.
   */
  resume?: string | undefined;
  /**
   * The environment's name in `metadata.json` (`policyloop eval` passes the `<env>` it loaded, so
   * that `rescore` can load it again).
   * @default environment.name (on `resume`: the run's)
   */
  envId?: string | undefined;
  /**
   * Limit of one rollout (with its reward), in milliseconds; past it the rollout is an error row.
   * @default 300000
   */
  timeout?: number | undefined;
  /**
   * Aborts the evaluation: rollouts in flight are aborted, the groups already finished stay
   * written, and `evaluate` rejects with `APIUserAbortError`.
   */
  signal?: AbortSignal | undefined;
  /** Called after each rollout and each group with how far the run is. */
  onProgress?: ((progress: EvaluationProgress) => void) | undefined;
}

/** What {@link evaluate} returns: the numbers `policyloop eval` prints and `metadata.json` holds, and the rows. */
export interface EvaluationResult extends EvaluationNumbers {
  /** Every row, by task and rollout index (a resumed run's kept rows included). */
  readonly rows: readonly EvaluationRow[];
  /** The folder written, when `out` or `resume` was given. */
  readonly outDir: string | undefined;
  /** `metadata.json` as written (also without a folder). */
  readonly metadata: EvaluationMetadata;
}

const EvaluateOptionsSchema = optionsSchema<EvaluateOptions>()({
  model: option.like<PromptedModel | TrainableModel>(
    (model) => typeof model?.openai === 'function' && typeof model?.inferenceName === 'function',
    'a PromptedModel or TrainableModel',
  ),
  examples: option.integer({ min: 1 }).optional(),
  rolloutsPerExample: option.integer({ min: 1 }).optional(),
  concurrency: option.integer({ min: 1 }).default(8),
  sampling: option.options<Readonly<Record<string, unknown>>>().optional(),
  threshold: option.number().optional(),
  out: option.nonEmptyString().optional(),
  resume: option.nonEmptyString().optional(),
  envId: option.nonEmptyString().optional(),
  timeout: option.timeout({ allowInfinity: true }).default(300_000),
  signal: option.signal().optional(),
  onProgress: option.function<(progress: EvaluationProgress) => void>().optional(),
});

/** The message of what was thrown. */
function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** JSON equality of two settings (key order of objects ignored). */
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortedKeys(a)) === JSON.stringify(sortedKeys(b));
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys((value as Record<string, unknown>)[key])]),
  );
}

/** The first `limit` tasks of `tasks`, read in order (the rest is never read). */
async function firstTasks<T>(tasks: AsyncIterable<T>, limit: number): Promise<T[]> {
  const list: T[] = [];
  if (limit <= 0) return list;
  for await (const task of tasks) {
    list.push(task);
    if (list.length >= limit) break;
  }
  return list;
}

/** Whether `directory` already holds an evaluation (a metadata or a non-empty results file). */
async function holdsEvaluation(directory: string): Promise<boolean> {
  const names = await readdir(directory).catch(() => [] as string[]);
  if (names.includes('metadata.json')) return true;
  if (!names.includes(RESULTS_FILE)) return false;
  return (await stat(path.join(directory, RESULTS_FILE))).size > 0;
}

/** Refuses to resume with a setting that differs from the run's, naming it. */
function checkSame(directory: string, name: string, saved: unknown, given: unknown): void {
  if (given === undefined || sameJson(saved, given)) return;
  throw new InvalidArgumentError(
    'resume',
    `Cannot resume ${directory} with ${name} ${JSON.stringify(given)}: the run has ${name} ${JSON.stringify(saved)} (start a new run with \`out\`, or drop the option to take the run's)`,
  );
}

/**
 * The rows one finished group becomes. `ended[i]` is rollout i's trajectory as it ended (the key
 * of its reward error), `failures[i]` its error when it threw; `group` is what the gather
 * returned, its trajectories the finished rollouts in order (maybe rescored by the group judge).
 */
function groupRows(
  exampleId: number,
  task: unknown,
  model: string,
  group: readonly Trajectory[],
  ended: readonly (Trajectory | undefined)[],
  failures: readonly (string | undefined)[],
  seconds: readonly number[],
  scoreErrors: WeakMap<Trajectory, string>,
): EvaluationRow[] {
  const rows: EvaluationRow[] = [];
  let next = 0;
  for (let index = 0; index < ended.length; index += 1) {
    const failure = failures[index];
    const endedTrajectory = ended[index];
    const time = seconds[index] ?? 0;
    if (failure !== undefined || endedTrajectory === undefined) {
      rows.push({
        example_id: exampleId,
        rollout_index: index,
        task,
        messages: [],
        reward: null,
        metrics: {},
        error: failure ?? 'the rollout did not finish',
        model,
        seconds: time,
      });
      continue;
    }
    const trajectory = group[next] ?? endedTrajectory;
    next += 1;
    const error = scoreErrors.get(endedTrajectory) ?? scoreErrors.get(trajectory) ?? null;
    const metrics: Record<string, number> = {};
    for (const [name, value] of Object.entries(trajectory.metrics)) metrics[name] = Number(value);
    const row: EvaluationRow = {
      example_id: exampleId,
      rollout_index: index,
      task,
      messages: trajectory.messages_and_choices.map(messageOf),
      reward: error === null ? trajectory.reward : null,
      metrics,
      error,
      model,
      seconds: time,
    };
    if (trajectory.additional_histories.length > 0) {
      row.additional_histories = trajectory.additional_histories.map((history) =>
        history.messages_and_choices.map(messageOf),
      );
    }
    rows.push(row);
  }
  return rows;
}

/**
 * A reward function that never throws: what `reward` threw (or a value that is not a finite
 * number) is kept in `errors` for the trajectory, whose messages stay, and the reward is 0.
 */
function catchingReward<T>(reward: RewardFn<T>, errors: WeakMap<Trajectory, string>): RewardFn<T> {
  const fail = (trajectory: Trajectory, error: unknown): number => {
    errors.set(trajectory, errorMessage(error));
    return 0;
  };
  // The name an error gives, as `evaluateReward` would: the function's own, else `reward`.
  const name = reward.name === '' ? 'reward' : reward.name;
  return (trajectory, task) => {
    let value: number | Promise<number>;
    try {
      value = reward(trajectory, task);
    } catch (error) {
      return fail(trajectory, asRewardError(name, error));
    }
    if (isPromiseLike(value)) {
      return value.then(
        (settled) => (isReward(settled) ? settled : fail(trajectory, notAReward(name, settled))),
        (error: unknown) => fail(trajectory, asRewardError(name, error)),
      );
    }
    return isReward(value) ? value : fail(trajectory, notAReward(name, value));
  };
}

/** Whether `value` is a reward: a finite number. */
function isReward(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** What a reward function threw, as a `RewardFunctionError` naming it (one it threw itself stays). */
function asRewardError(name: string, error: unknown): RewardFunctionError {
  if (error instanceof RewardFunctionError) return error;
  return new RewardFunctionError(name, `threw: ${errorMessage(error)}`, { cause: error });
}

/** A reward function's value that is not a finite number, as a `RewardFunctionError`. */
function notAReward(name: string, value: unknown): RewardFunctionError {
  return new RewardFunctionError(name, `returned ${describeValue(value)}; expected a finite number`, { value });
}

/** A group judge that never throws: its error becomes every trajectory's of the group. */
function catchingScorer<T>(scoreGroup: GroupScorer<T>, errors: WeakMap<Trajectory, string>): GroupScorer<T> {
  return async (group, context) => {
    try {
      return await scoreGroup(group, context);
    } catch (error) {
      if (context.signal.aborted) throw error;
      const message = `scoreGroup: ${errorMessage(error)}`;
      for (const trajectory of group.trajectories) errors.set(trajectory, message);
      return undefined;
    }
  };
}

/**
 * Writes finished groups in order of finishing. The groups that finish in one turn of the event
 * loop go together into one write on the next turn: their lines appended to `results.jsonl`
 * through a descriptor kept open for the run, each group's lines whole in one write. Then
 * `metadata.json` is rewritten (a temporary file renamed over it) with every group written so
 * far, so that both files are current after every group. The writes are synchronous:
 * a few small writes a turn, where an asynchronous file call costs several times the CPU (a trip
 * through libuv's thread pool; bench/eval.ts). `close` writes what is left and closes the file.
 */
class GroupWriter {
  private queued: EvaluationRow[] = [];
  private failure: unknown = undefined;
  private scheduled: Promise<void> | undefined = undefined;
  private descriptor: number | undefined = undefined;
  private metadataWritten = false;

  constructor(
    private readonly directory: string | undefined,
    private readonly metadata: () => EvaluationMetadata,
  ) {}

  /** Queues a finished group's rows; they are written on the next turn of the event loop. */
  add(rows: readonly EvaluationRow[]): void {
    if (this.directory === undefined) return;
    for (const row of rows) this.queued.push(row);
    this.scheduled ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        this.scheduled = undefined;
        this.writeRows();
        resolve();
      }),
    );
  }

  private writeRows(): void {
    const rows = this.queued;
    this.queued = [];
    if (rows.length === 0 || this.failure !== undefined) return;
    // The first metadata.json before the first rows: a folder with rows always has one (resumable).
    if (!this.metadataWritten) this.writeMetadata();
    if (this.failure !== undefined) return;
    try {
      this.descriptor ??= openSync(path.join(this.directory as string, RESULTS_FILE), 'a');
      const bytes = Buffer.from(rowLines(rows));
      for (let offset = 0; offset < bytes.length; ) offset += writeSync(this.descriptor, bytes, offset);
    } catch (error) {
      this.failure = error;
      return;
    }
    this.writeMetadata();
  }

  private writeMetadata(): void {
    if (this.failure !== undefined) return;
    try {
      writeMetadataSync(this.directory as string, this.metadata());
      this.metadataWritten = true;
    } catch (error) {
      this.failure = error;
    }
  }

  /** Writes what is queued (rows, then metadata) and closes the file. Rejects with the first write error. */
  async close(): Promise<void> {
    await this.scheduled;
    this.writeRows();
    if (this.descriptor !== undefined) closeSync(this.descriptor);
    this.descriptor = undefined;
    if (this.failure !== undefined) {
      throw new PolicyloopError(`Could not write the evaluation to ${this.directory}: ${errorMessage(this.failure)}`, {
        cause: this.failure,
      });
    }
  }
}

/**
 * Measures `options.model` on the first `examples` tasks of `environment.evalDataset()` (in
 * order), `rolloutsPerExample` rollouts each, `concurrency` in flight, through
 * `gatherTrajectoryGroups` (one group per task; the environment's `scoreGroup` judges each). Each
 * rollout becomes a row: its messages, reward, each rubric function's value, its time. A rollout,
 * rubric function or group judge that throws makes an error row (counted in `errors`, its
 * messages kept when only the reward failed); it never stops the run. Reward and metrics are
 * averaged over the rows without error; pass@k and pass^k (k = 1, 2, 4, ... up to
 * `rolloutsPerExample`) over the tasks, an error row counting as not correct. The model is never
 * asked for logprobs beyond what its client sends by default, and needs none.
 *
 * With `out`, each finished group is written as it ends (`results.jsonl`, `metadata.json`);
 * `resume` finishes such a folder's run. An abort (`signal`) rejects with `APIUserAbortError` once
 * the groups already finished are written.
 * @throws {InvalidArgumentError} for a bad option, an `out` that holds an evaluation, or a `resume`
 *   whose run has other settings (named).
 * @example
 * const result = await evaluate(environment, {
 *   model: new PromptedModel({ project: 'eval', name: 'mini', model: 'gpt-4o-mini', baseURL: 'https://api.openai.com/v1' }),
 *   examples: 50,
 *   rolloutsPerExample: 4,
 *   sampling: { temperature: 0.7, max_tokens: 512 },
 *   out: 'evals/mini',
 * });
 * console.log(result.avgReward, result.passAtK['4'], result.errors);
 */
export async function evaluate<T>(environment: Environment<T>, options: EvaluateOptions): Promise<EvaluationResult> {
  const parsed = parseOptions(EvaluateOptionsSchema, options);
  if (typeof environment?.evalDataset !== 'function' || typeof environment.start !== 'function') {
    throw new InvalidArgumentError('environment', 'Expected an Environment (defineEnvironment, loadEnvironment)');
  }
  if (parsed.out !== undefined && parsed.resume !== undefined) {
    throw new InvalidArgumentError('resume', 'Give `out` (a new run) or `resume` (a run to finish), not both');
  }
  const plan = await planEvaluation(environment, parsed);
  const { settings, tasks, directory } = plan;
  const numbersSettings = { rolloutsPerExample: settings.rollouts_per_example, threshold: settings.threshold };
  const rowsByExample = new Map<number, EvaluationRow[]>(plan.kept);
  // The running numbers of metadata.json, a group's rows added as it ends (the final numbers are
  // computed again from the rows in task order).
  const running = new RowSummary(numbersSettings);
  for (const rows of rowsByExample.values()) running.add(rows);
  const remaining = tasks.map((_, exampleId) => exampleId).filter((exampleId) => !plan.kept.has(exampleId));
  if (remaining.length > 0) {
    const tally = new ProgressTally(tasks.length, settings.rollouts_per_example, parsed.onProgress);
    for (const rows of rowsByExample.values()) tally.addKept(rows);
    // metadata.json comes just before the first group's rows (or at the end): a run killed before
    // has nothing to resume, and its folder may be used again as `out`.
    const writer = new GroupWriter(directory, () => metadataOf(settings, running.numbers()));
    const run = await environment.start({ model: parsed.model, sampling: settings.sampling, signal: parsed.signal });
    try {
      await runGroups(run, parsed, plan, remaining, tally, (exampleId, rows) => {
        rowsByExample.set(exampleId, rows);
        running.add(rows);
        writer.add(rows);
      });
    } finally {
      // The finished groups are written before the environment's resources are released.
      try {
        await writer.close();
      } finally {
        await run.close();
      }
    }
  }
  const rows = [...rowsByExample.entries()].sort((a, b) => a[0] - b[0]).flatMap(([, group]) => group);
  const numbers = summarizeRows(rows, numbersSettings);
  const final = metadataOf(settings, numbers);
  if (directory !== undefined) await writeMetadata(directory, final);
  return { ...numbers, rows, outDir: directory === undefined ? undefined : path.resolve(directory), metadata: final };
}

/** {@link EvaluateOptions} as parsed (defaults filled). */
type ParsedEvaluateOptions = ReturnType<typeof parseOptions<typeof EvaluateOptionsSchema>>;

/** One evaluation run: its settings (as metadata.json records them), its tasks, its folder, and the groups a resumed run keeps. */
interface EvaluationPlan<T> {
  readonly settings: EvaluationSettings;
  readonly tasks: readonly T[];
  readonly directory: string | undefined;
  /** The complete groups of the run being resumed, by task index (never rerun). */
  readonly kept: ReadonlyMap<number, EvaluationRow[]>;
}

/**
 * The run `parsed` asks for: a resumed run's settings checked against those given (each default
 * taken from it), the tasks read, the `out` folder made (refused when it holds an evaluation), a
 * resumed folder's results.jsonl rewritten to its complete groups.
 */
async function planEvaluation<T>(
  environment: Environment<T>,
  parsed: ParsedEvaluateOptions,
): Promise<EvaluationPlan<T>> {
  const modelName = parsed.model.model;
  const envArgs = { ...environment.args };
  const saved = parsed.resume === undefined ? undefined : await readEvaluation(parsed.resume);
  const previous = saved?.metadata;
  if (previous !== undefined) {
    const directory = parsed.resume as string;
    checkSame(directory, 'envId', previous.env_id, parsed.envId);
    checkSame(directory, 'the environment args', previous.env_args, envArgs);
    checkSame(directory, 'the model', previous.model, modelName);
    checkSame(directory, 'rolloutsPerExample', previous.rollouts_per_example, parsed.rolloutsPerExample);
    checkSame(
      directory,
      'sampling',
      previous.sampling,
      parsed.sampling === undefined ? undefined : { ...environment.spec?.sampling, ...parsed.sampling },
    );
    checkSame(directory, 'threshold', previous.threshold, parsed.threshold);
  }
  const rolloutsPerExample = parsed.rolloutsPerExample ?? previous?.rollouts_per_example ?? 1;
  const limit = parsed.examples ?? previous?.num_examples ?? Number.POSITIVE_INFINITY;
  const tasks = await firstTasks(environment.evalDataset(), limit);
  if (previous !== undefined) checkSame(parsed.resume as string, 'examples', previous.num_examples, tasks.length);
  if (parsed.out !== undefined) {
    await mkdir(parsed.out, { recursive: true });
    if (await holdsEvaluation(parsed.out)) {
      throw new InvalidArgumentError(
        'out',
        `${parsed.out} already holds an evaluation: finish it with \`resume\`, or write to another folder`,
      );
    }
  }
  const settings: EvaluationSettings = {
    env_id: parsed.envId ?? previous?.env_id ?? environment.name,
    env_args: envArgs,
    model: modelName,
    base_url: inferenceBaseURLOf(parsed.model),
    num_examples: tasks.length,
    rollouts_per_example: rolloutsPerExample,
    // What the rollouts get: the environment's own sampling under the evaluation's, key by key (as
    // `start` merges them), recorded as it is in force.
    sampling: { ...environment.spec?.sampling, ...(parsed.sampling ?? previous?.sampling ?? {}) },
    threshold: parsed.threshold ?? previous?.threshold ?? 0.5,
  };
  const kept = completeGroups(saved?.rows ?? [], { rolloutsPerExample, numExamples: tasks.length });
  if (parsed.resume !== undefined) {
    const rows = [...kept.values()].flat();
    await writeFileAtomically(path.join(parsed.resume, RESULTS_FILE), rowLines(rows));
  }
  return { settings, tasks, directory: parsed.out ?? parsed.resume, kept };
}

/** The model's inference base URL, or null when it has none yet (a model not registered). */
function inferenceBaseURLOf(model: PromptedModel | TrainableModel): string | null {
  try {
    return model.inferenceBaseURL;
  } catch {
    return null;
  }
}

/** The counts `onProgress` reports: rollouts done, errors, and the reward mean of the rest. */
class ProgressTally {
  private done = 0;
  private errors = 0;
  private rewardSum = 0;
  private scored = 0;
  private groupsDone = 0;

  constructor(
    private readonly groupsTotal: number,
    private readonly rolloutsPerExample: number,
    private readonly onProgress: ((progress: EvaluationProgress) => void) | undefined,
  ) {}

  /** Counts a kept group of a resumed run (no report). */
  addKept(rows: readonly EvaluationRow[]): void {
    this.groupsDone += 1;
    for (const row of rows) {
      this.done += 1;
      if (row.error !== null || row.reward === null) this.errors += 1;
      else this.scoreReward(row.reward, 1);
    }
  }

  /** A rollout ended: scored with `reward`, or (`reward` undefined) an error. */
  rolloutEnded(reward: number | undefined): void {
    this.done += 1;
    if (reward === undefined) this.errors += 1;
    else this.scoreReward(reward, 1);
    this.report();
  }

  /** A rollout counted as scored with `reward` turned out an error (its group judge failed). */
  unscore(reward: number): void {
    this.scoreReward(reward, -1);
    this.errors += 1;
  }

  /** A group ended. */
  groupEnded(): void {
    this.groupsDone += 1;
    this.report();
  }

  private scoreReward(reward: number, sign: 1 | -1): void {
    this.rewardSum += sign * reward;
    this.scored += sign;
  }

  private report(): void {
    this.onProgress?.({
      done: this.done,
      total: this.groupsTotal * this.rolloutsPerExample,
      errors: this.errors,
      rewardMean: this.scored === 0 ? Number.NaN : this.rewardSum / this.scored,
      groupsDone: this.groupsDone,
      groupsTotal: this.groupsTotal,
    });
  }
}

/**
 * Runs the `remaining` tasks of `plan` on the started environment `run` through `gatherTrajectoryGroups`, one group each, and
 * hands each finished group's rows to `groupDone` as it ends (errors as rows, never a stop).
 */
async function runGroups<T>(
  run: EnvironmentRun<T>,
  parsed: ParsedEvaluateOptions,
  plan: EvaluationPlan<T>,
  remaining: readonly number[],
  tally: ProgressTally,
  groupDone: (exampleId: number, rows: EvaluationRow[]) => void,
): Promise<void> {
  const { model, signal } = parsed;
  const { tasks, settings } = plan;
  const rolloutsPerExample = settings.rollouts_per_example;
  const scoreErrors = new WeakMap<Trajectory, string>();
  const slots = remaining.length * rolloutsPerExample;
  const started = new Float64Array(slots);
  const seconds = new Float64Array(slots);
  const ended: (Trajectory | undefined)[] = new Array(slots);
  const failures: (string | undefined)[] = new Array(slots);
  // 1 for a slot already counted as an error in the progress.
  const counted = new Uint8Array(slots);
  const events = new GatherEmitter<T>();
  events.on('rollout:start', ({ groupIndex, index, attempt }) => {
    if (attempt === 0) started[groupIndex * rolloutsPerExample + index] = performance.now();
  });
  const finish = (slot: number): void => {
    seconds[slot] = (performance.now() - (started[slot] as number)) / 1000;
  };
  events.on('rollout:end', ({ groupIndex, index, trajectory }) => {
    const slot = groupIndex * rolloutsPerExample + index;
    ended[slot] = trajectory;
    finish(slot);
    const failed = scoreErrors.has(trajectory);
    if (failed) counted[slot] = 1;
    tally.rolloutEnded(failed ? undefined : trajectory.reward);
  });
  events.on('rollout:error', ({ groupIndex, index, error, willRetry }) => {
    if (willRetry) return;
    const slot = groupIndex * rolloutsPerExample + index;
    failures[slot] = errorMessage(error);
    counted[slot] = 1;
    finish(slot);
    tally.rolloutEnded(undefined);
  });
  events.on('group:end', ({ groupIndex, scenario, group }) => {
    const exampleId = remaining[groupIndex] as number;
    const from = groupIndex * rolloutsPerExample;
    const to = from + rolloutsPerExample;
    const rows = groupRows(
      exampleId,
      scenario,
      settings.model,
      group.trajectories,
      ended.slice(from, to),
      failures.slice(from, to),
      Array.from(seconds.subarray(from, to)),
      scoreErrors,
    );
    // A group judge that failed made rows counted as scored into errors: recount them.
    for (const row of rows) {
      const slot = from + row.rollout_index;
      const trajectory = ended[slot];
      if (row.error === null || counted[slot] === 1 || trajectory === undefined) continue;
      tally.unscore(trajectory.reward);
    }
    // The rows hold what is kept: the group's trajectories may go.
    ended.fill(undefined, from, to);
    groupDone(exampleId, rows);
    tally.groupEnded();
  });
  await gatherTrajectoryGroups(
    remaining.map((exampleId) => tasks[exampleId] as T),
    run.rollout,
    {
      groupSize: rolloutsPerExample,
      concurrency: parsed.concurrency,
      timeout: parsed.timeout,
      reward: run.reward === undefined ? undefined : catchingReward(run.reward, scoreErrors),
      scoreGroup: run.scoreGroup === undefined ? undefined : catchingScorer(run.scoreGroup, scoreErrors),
      // Every rollout may fail: each failure is an error row, never the end of the run.
      maxExceptions: slots,
      signal,
      events,
      model,
    },
  );
}

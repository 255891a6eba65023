/**
 * One run of an {@link RLTrainer}, in named pieces, as tinker-cookbook's `rl/train.py` has them:
 * the start (resume, first validation); one of two loops, the synchronous loop
 * (`maxStepsOffPolicy: 0`: sample, train, repeat) or the pipelined loop (a sampler keeps batches
 * launched ahead within `maxStepsOffPolicy` while a step trains); one step (`trainStep`: drop
 * groups, train, report) and what follows it (`afterStep`: validation, retention); and the end
 * (drain, final retention, summary). The run's state lives here, one object a run.
 */
import { setMaxListeners } from 'node:events';
import type { EventEmitter } from 'eventemitter3';
import { abortReason, raceSignal } from '../internal/delay.js';
import { PolicyloopError, userAbortError } from '../internal/errors.js';
import { GatherEmitter } from '../rollout/gather-events.js';
import { gatherTrajectoryGroups } from '../rollout/gather-trajectory-groups.js';
import type { ProgressStream } from '../rollout/progress-bar.js';
import type { TrajectoryGroup } from '../schema/index.js';
import { hasZeroRewardVariance, prepareBatch } from './batch.js';
import type { TrainingBatch } from './batch.js';
import { nothingToTrainError } from './batch.js';
import { NoLearningSignalError } from './errors.js';
import { bestStep, pruneRun } from './run-retention.js';
import { baselineRoute } from './prompted-model.js';
import type { EndpointModel } from '../rollout/endpoint/rollout-endpoint.js';
import type { PromptedModel } from './prompted-model.js';
import type { RewardSpec } from '../rewards/combine-rewards.js';
import type { GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { RolloutFn } from '../rollout/rollout-function.js';
import type {
  RLStopReason,
  RLTrainerEvents,
  RLTrainerSummary,
  TrainerConfig,
  TrainerEnvironment,
  TrainerEnvironmentRun,
} from './rl-types.js';
import { ScenarioSource } from './scenario-source.js';
import { learningRateAt } from './schedules.js';
import { runWithPinnedSteps } from './step-pin.js';
import type { StepRoute } from './step-pin.js';
import { trainBatch } from './trainable-model.js';
import type { TrainableModel } from './trainable-model.js';

/** A batch of groups sampled for one step. */
interface SampledBatch {
  readonly groups: TrajectoryGroup[];
  readonly sampledStep: number;
  readonly seconds: number;
  /** Rollouts that failed for good, and failed attempts retried. */
  readonly failed: number;
  readonly retried: number;
}

/** A batch being sampled. */
interface PendingBatch {
  readonly sampledStep: number;
  readonly promise: Promise<SampledBatch>;
}

type Totals = { -readonly [K in keyof RLTrainerSummary['totals']]: number };

/** A run's validation, its scenarios known (the options', or the environment's held-out tasks). */
interface Validation<S> {
  readonly scenarios: readonly S[];
  readonly every: number;
  readonly groupSize: number;
  readonly baselines: readonly PromptedModel[];
}

/** What a run plays: the options' rollout, reward and judge, else its environment's. */
interface RunParts<S> {
  readonly rollout: RolloutFn<S>;
  readonly reward: RewardSpec<S> | undefined;
  readonly scoreGroup: GroupScorer<S> | undefined;
  readonly validation: Validation<S> | undefined;
}

/** The default validation on an environment's held-out tasks (as `validation`'s own defaults). */
const ENVIRONMENT_VALIDATION: Omit<Validation<never>, 'scenarios'> & { readonly scenarios?: undefined } = {
  every: 10,
  groupSize: 1,
  baselines: [],
};

/** What a run needs of its trainer. */
export interface RunHost<S> {
  readonly config: TrainerConfig<S>;
  readonly events: EventEmitter<RLTrainerEvents>;
  readonly stream: ProgressStream | undefined;
}

/** One {@link RLTrainer.run}: `execute()` once. */
export class RLRun<S> {
  private readonly host: RunHost<S>;
  private readonly model: TrainableModel;
  private readonly signal: AbortSignal | undefined;
  private readonly started = performance.now();
  /** Stops sampling and validation at once (abort, stop, or a failure). */
  private readonly stopper = new AbortController();
  /** Stops the training batches only (at the end of a run, validations still finish). */
  private readonly sampling = new AbortController();
  private readonly totals: Totals = {
    steps: 0,
    rollouts: 0,
    tokens: 0,
    droppedStale: 0,
    droppedZeroVariance: 0,
    failedRollouts: 0,
    droppedFailed: 0,
    skippedBatches: 0,
  };
  /** Batches launched and not yet taken, in launch order (so versions ascend: stalest first). */
  private readonly queue: PendingBatch[] = [];
  /** Validations under way (their errors end the run). */
  private readonly background = new Set<Promise<unknown>>();
  /** Steps being validated: their checkpoints are kept until done. */
  private readonly validating = new Set<number>();
  private failure: { error: unknown } | undefined;
  /** The model's step. */
  private latest = 0;
  /** A batch is taken (waited for, checked or training): it trains before any launched now. */
  private training = false;
  private exhausted = false;
  private stopSampling = false;
  private filling: Promise<void> | undefined;
  /** Counts groups in a row with nothing to learn, for `collapseAfter`. */
  private readonly learning = new LearningSignal();
  /** When the previous step ended (`Date.now()`), for the next one's `time/step`. */
  private lastStepEnd = Date.now();
  private lastTrainEnd = this.started;
  private source: ScenarioSource<S> | undefined;
  private inferenceName = '';
  /** The environment started for this run, closed when it ends. */
  private environmentRun: TrainerEnvironmentRun<S> | undefined;
  /** Set by `start`. */
  private parts: RunParts<S> | undefined;

  /** A run of `host`'s trainer, stopped by `signal`. */
  constructor(host: RunHost<S>, model: TrainableModel, signal: AbortSignal | undefined) {
    this.host = host;
    this.model = model;
    this.signal = signal;
    setMaxListeners(Number.POSITIVE_INFINITY, this.stopper.signal);
    setMaxListeners(Number.POSITIVE_INFINITY, this.sampling.signal);
  }

  /** Runs to the end; nothing is left running or pending when it settles. */
  async execute(): Promise<RLTrainerSummary> {
    const { signal, stopper } = this;
    const onAbort = (): void => stopper.abort(abortReason(signal));
    stopper.signal.addEventListener('abort', () => this.sampling.abort(stopper.signal.reason), { once: true });
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const startStep = await this.start();
      const stopReason =
        this.host.config.maxStepsOffPolicy === 0 ? await this.synchronousLoop() : await this.pipelinedLoop();
      return await this.finish(startStep, stopReason);
    } catch (error) {
      this.stopSampling = true;
      stopper.abort(error);
      throw signal?.aborted === true && !(error instanceof NoLearningSignalError)
        ? userAbortError(signal, 'The run')
        : error;
    } finally {
      await this.settle();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Starts the environment (if any), finishes a step a killed run left, reads the step, and
   * validates it unless a rerun did.
   */
  private async start(): Promise<number> {
    const { model, stopper } = this;
    const { config } = this.host;
    this.parts = await this.startParts();
    await raceSignal(model.finishPendingJob({ signal: stopper.signal }), stopper.signal);
    this.latest = await model.getStep({ signal: stopper.signal });
    const startStep = this.latest;
    const offset = startStep * config.groupsPerStep;
    this.source =
      config.scenarios === undefined
        ? new ScenarioSource(epochs(config.environment as TrainerEnvironment<S>, offset), 0)
        : new ScenarioSource(config.scenarios, offset);
    this.inferenceName = model.inferenceName();
    // A rerun does not validate a step again.
    const validated = (await model.history()).some(
      (row) => row.training_step === this.latest && Object.keys(row).some((name) => name.startsWith('val/')),
    );
    if (!validated) this.validate(this.latest);
    this.validateBaselines(startStep);
    this.lastStepEnd = Date.now();
    return startStep;
  }

  /**
   * The synchronous loop (`maxStepsOffPolicy: 0`): samples a batch from the model's step, trains
   * it, and only then samples the next, so every group trains on the policy that sampled it.
   * Steps until `maxSteps`, a budget, the scenarios' end or an abort; resolves with why it stopped.
   */
  private async synchronousLoop(): Promise<RLStopReason> {
    while (this.latest < this.host.config.maxSteps) {
      const stop = this.stopBeforeStep();
      if (stop === 'aborted') break;
      if (stop !== undefined) return stop;
      const launched = await this.launchBatch();
      if (launched === 'stopped') break;
      if (launched === 'exhausted') return 'scenarios_exhausted';
      const batch = await raceSignal(launched.promise, this.stopper.signal);
      if (await this.trainStep(batch)) await this.afterStep();
    }
    return 'max_steps';
  }

  /**
   * The pipelined loop (`maxStepsOffPolicy` >= 1): the sampler ({@link fill}) keeps batches
   * launched ahead while a step trains; each step takes the stalest, and the sampler refills as
   * soon as a batch leaves (trained or skipped). Stops as {@link synchronousLoop} does.
   */
  private async pipelinedLoop(): Promise<RLStopReason> {
    while (this.latest < this.host.config.maxSteps) {
      const stop = this.stopBeforeStep();
      if (stop === 'aborted') break;
      if (stop !== undefined) return stop;
      const batch = await this.nextBatch();
      if (batch === 'aborted') break;
      if (batch === 'exhausted') return 'scenarios_exhausted';
      let trained: boolean;
      try {
        trained = await this.trainStep(batch);
      } finally {
        this.training = false;
      }
      void this.fill();
      if (trained) await this.afterStep();
    }
    return 'max_steps';
  }

  /**
   * Before each step: rethrows a background failure; 'aborted' when the run is stopping (an
   * abort is thrown by `finish`), or the budget reached, if any.
   */
  private stopBeforeStep(): RLStopReason | 'aborted' | undefined {
    this.throwFailure();
    if (this.stopper.signal.aborted) return 'aborted';
    return this.budgetReached();
  }

  /**
   * One step, as tinker's `train_step`: checks the batch once (`prepareBatch`: stale groups and
   * ones with too few finished rollouts left out, each kind in one `groups:dropped`), trains the
   * rest at the model's step, and reports it (`step:start`, `step:end` with the step's one row,
   * the progress line). Resolves false when no group had a learning signal (the batch is skipped).
   */
  private async trainStep(batch: SampledBatch): Promise<boolean> {
    const { config, events } = this.host;
    const step = this.latest;
    this.totals.rollouts += batch.groups.reduce((sum, group) => sum + group.trajectories.length, 0);
    this.totals.failedRollouts += batch.failed;
    const checked = this.checkBatch(batch, step);
    if (checked === undefined) {
      this.totals.skippedBatches += 1;
      return false;
    }
    events.emit('step:start', {
      step,
      sampledStep: batch.sampledStep,
      groups: checked.groups.length,
    });
    const trainStart = performance.now();
    const learningRate =
      config.learningRate === undefined
        ? undefined
        : learningRateAt(config.learningRate, step, { maxSteps: config.maxSteps });
    // A learning rate of the trainer's wins over `train.learningRate`; without one, that one stays.
    const params = { ...config.train, ...(learningRate === undefined ? {} : { learningRate }) };
    const loop = {
      metrics: {
        'time/sample': batch.seconds,
        'idle/service': seconds(this.lastTrainEnd, trainStart),
        'rollouts/retried': batch.retried,
      },
      startedAt: this.lastStepEnd,
    };
    // No signal: an abort lets the job finish, so the step's row is written.
    const result = await this.model[trainBatch](checked, params, { ...config.job }, loop);
    this.lastTrainEnd = performance.now();
    this.lastStepEnd = Date.now();
    this.latest = result.step;
    this.totals.steps += 1;
    events.emit('step:end', { step, sampledStep: batch.sampledStep, metrics: result.metrics });
    this.host.stream?.write(`${formatStepLine(step, config.maxSteps, result.metrics)}\n`);
    return true;
  }

  /**
   * What the run plays: the environment started (its rollout, reward and judge, and its held-out
   * tasks for validation), each overridden by the options that are given.
   */
  private async startParts(): Promise<RunParts<S>> {
    const { config } = this.host;
    const environment = config.environment;
    if (environment !== undefined) {
      this.environmentRun = await raceSignal(
        environment.start({ model: this.model, sampling: config.sampling, signal: this.stopper.signal }),
        this.stopper.signal,
      );
    }
    const run = this.environmentRun;
    let validation: Validation<S> | undefined;
    if (config.validation !== false && (config.validation !== undefined || environment?.hasEvalDataset === true)) {
      const given = config.validation ?? ENVIRONMENT_VALIDATION;
      const scenarios = given.scenarios ?? (await readAll((environment as TrainerEnvironment<S>).evalDataset()));
      if (scenarios.length === 0 && config.validation !== undefined) {
        throw new PolicyloopError(
          `The environment \`${environment?.name}\` has no held-out tasks to validate on: its evalDataset is empty.`,
        );
      }
      validation = scenarios.length === 0 ? undefined : { ...given, scenarios };
    }
    return {
      rollout: config.rollout ?? (run as TrainerEnvironmentRun<S>).rollout,
      reward: config.reward ?? run?.reward,
      scoreGroup: config.scoreGroup ?? run?.scoreGroup,
      validation,
    };
  }

  /** After a step trained: a validation of the new checkpoint when one is due, then retention. */
  private async afterStep(): Promise<void> {
    const { keep } = this.host.config;
    const validation = this.parts?.validation;
    if (validation !== undefined && this.latest % validation.every === 0 && !this.stopper.signal.aborted) {
      this.validate(this.latest);
    }
    if (keep !== undefined) await this.prune(false);
  }

  /**
   * The batch checked once (`prepareBatch`), its dropped groups reported once, or undefined when
   * no group has a learning signal (the batch is skipped). Stops the run with
   * `NoLearningSignalError` after `collapseAfter` equal-reward groups in a row.
   */
  private checkBatch(batch: SampledBatch, step: number): TrainingBatch | undefined {
    const { maxStepsOffPolicy, minGroupSize, collapseAfter } = this.host.config;
    const requireLogprobs = this.host.config.train?.allowTrainingWithoutLogprobs !== true;
    const checked = prepareBatch(batch.groups, { step, maxStepsOffPolicy, minGroupSize, requireLogprobs });
    for (const event of checked.dropped) this.host.events.emit('groups:dropped', event);
    this.totals.droppedStale += checked.metrics['groups/dropped_stale'] ?? 0;
    this.totals.droppedFailed += checked.metrics['groups/dropped_failed'] ?? 0;
    this.totals.droppedZeroVariance += checked.metrics['groups/dropped_zero_variance'] ?? 0;
    this.learning.observe(batch.groups, checked, collapseAfter);
    const nothing = checked.nothingToTrain;
    if (nothing === undefined) return checked;
    // A batch with no signal is skipped; one whose rollouts recorded no completion is a mistake.
    if (nothing.reason === 'no_choice') throw nothingToTrainError(checked, batch.groups);
    return undefined;
  }

  /** The pipelined loop's next batch: the stalest launched, sampled (the sampler launches when none is). */
  private async nextBatch(): Promise<SampledBatch | 'aborted' | 'exhausted'> {
    while (this.queue.length === 0 && !this.exhausted && !this.stopper.signal.aborted) await this.fill();
    this.throwFailure();
    if (this.stopper.signal.aborted) return 'aborted';
    const next = this.queue.shift();
    if (next === undefined) return 'exhausted';
    // The batch taken counts as ahead of any launched from now until its step has trained.
    this.training = true;
    return raceSignal(next.promise, this.stopper.signal);
  }

  /**
   * The pipelined loop's sampler: launches batches while the bound allows. A batch launched now
   * trains no earlier than after the ones ahead of it (queued, and the one training), so at most
   * `maxStepsOffPolicy` of those: rollouts for that many next steps run while a step trains.
   */
  private fill(): Promise<void> {
    this.filling ??= this.launchAhead().finally(() => {
      this.filling = undefined;
    });
    return this.filling;
  }

  private async launchAhead(): Promise<void> {
    const { maxStepsOffPolicy, maxSteps } = this.host.config;
    for (;;) {
      const ahead = this.queue.length + (this.training ? 1 : 0);
      if (this.stopSampling || this.exhausted || this.stopper.signal.aborted) return;
      if (ahead > maxStepsOffPolicy || ahead >= maxSteps - this.latest) return;
      const launched = await this.launchBatch();
      if (typeof launched === 'string') return;
      this.queue.push(launched);
    }
  }

  /** Takes the next `groupsPerStep` scenarios and starts their rollouts at the model's step. */
  private async launchBatch(): Promise<PendingBatch | 'exhausted' | 'stopped'> {
    const scenarios = await (this.source as ScenarioSource<S>).take(this.host.config.groupsPerStep);
    // An async iterable may have taken a while: nothing starts once the run is ending.
    if (this.stopSampling || this.stopper.signal.aborted) return 'stopped';
    if (scenarios.length === 0) {
      this.exhausted = true;
      return 'exhausted';
    }
    return this.sampleBatch(scenarios, this.latest);
  }

  /** Starts the rollouts of one batch at `version`. */
  private sampleBatch(scenarios: readonly S[], sampledStep: number): PendingBatch {
    const startedAt = performance.now();
    const counts = { failed: 0, retried: 0 };
    const events = new GatherEmitter<S>();
    events.on('rollout:error', ({ groupIndex, index, attempt, error, willRetry }) => {
      if (willRetry) counts.retried += 1;
      else counts.failed += 1;
      this.host.events.emit('rollout:failed', { sampledStep, groupIndex, index, attempt, error, willRetry });
    });
    const { groupSize } = this.host.config;
    const promise = this.gather(
      scenarios,
      groupSize,
      sampledStep,
      { step: sampledStep },
      this.model,
      this.sampling.signal,
      events,
    ).then((groups) => ({ groups, sampledStep, seconds: seconds(startedAt), ...counts }));
    promise.catch(() => undefined);
    return { sampledStep, promise };
  }

  /**
   * Gathers groups with the model's requests routed to `route` (a step, or a baseline), and each
   * rollout's `context.endpoint` forwarding to `target` (the model, or the baseline).
   */
  private gather(
    scenarios: readonly S[],
    size: number,
    sampledStep: number,
    route: StepRoute,
    target: EndpointModel,
    gatherSignal: AbortSignal,
    events?: GatherEmitter<S>,
  ): Promise<TrajectoryGroup[]> {
    const options = this.host.config;
    const parts = this.parts as RunParts<S>;
    const onTokens = (tokens: number): void => {
      this.totals.tokens += tokens;
    };
    return runWithPinnedSteps({ routes: new Map([[this.inferenceName, route]]), onTokens }, () =>
      gatherTrajectoryGroups(scenarios, parts.rollout, {
        // A rollout that throws costs that rollout: retried once, then kept in its group.
        maxRetries: 1,
        maxExceptions: 0.25,
        ...options.gather,
        events,
        groupSize: size,
        reward: parts.reward,
        scoreGroup: parts.scoreGroup,
        sampledStep: () => sampledStep,
        signal: gatherSignal,
        model: target,
      }),
    );
  }

  /** Validates `step` in the background (`val/*` row, `validation:end`), then prunes. */
  private validate(step: number): void {
    if (this.parts?.validation === undefined) return;
    this.validating.add(step);
    const work = async (): Promise<void> => {
      try {
        await this.validation(this.model, { step }, step);
      } finally {
        this.validating.delete(step);
      }
      await this.prune(false);
    };
    this.track(work());
  }

  /** Scores each baseline once, at the start step, with the validation rollouts. */
  private validateBaselines(startStep: number): void {
    for (const baseline of this.parts?.validation?.baselines ?? []) {
      this.track(this.validation(baseline, baselineRoute(baseline), startStep));
    }
  }

  /** Rolls the validation scenarios out against `route` and logs them as `model`'s `val/*` row at `step`. */
  private async validation(
    model: Pick<PromptedModel, 'log' | 'name'> & EndpointModel,
    route: StepRoute,
    step: number,
  ): Promise<void> {
    const validation = this.parts?.validation;
    if (validation === undefined) return;
    const groups = await this.gather(
      validation.scenarios,
      validation.groupSize,
      step,
      route,
      model,
      this.stopper.signal,
    );
    const row = await model.log({ groups, split: 'val', step });
    this.host.events.emit('validation:end', { step, model: model.name, metrics: numericMetrics(row) });
  }

  /** Deletes checkpoints `keep` does not keep, sparing the ones still sampled from. */
  private prune(final: boolean): Promise<void> {
    const sampledFrom = [...this.queue.map((batch) => batch.sampledStep), ...this.validating];
    return pruneRun(this.model, this.host.config.keep, this.latest, sampledFrom, final);
  }

  /** Stops sampling, waits for validations, prunes for the last time and sums the run up. */
  private async finish(startStep: number, stopReason: RLStopReason): Promise<RLTrainerSummary> {
    const { signal, model } = this;
    const { keep } = this.host.config;
    this.stopSampling = true;
    if (signal?.aborted) throw userAbortError(signal, 'The run');
    // Rollouts of batches no step will train are stopped; validations are awaited.
    this.sampling.abort(new PolicyloopError('The run ended: sampling for later steps stopped.'));
    await this.drain();
    this.throwFailure();
    if (signal?.aborted) throw userAbortError(signal, 'The run');
    if (keep !== undefined) await this.prune(true);
    await this.environmentRun?.close();
    await model.flushLogs();
    const best = await bestStep(model, keep);
    return {
      step: this.latest,
      startStep,
      stopReason,
      bestStep: best.step,
      bestMetric: best.value,
      metric: keep?.metric ?? 'val/reward',
      totals: { ...this.totals },
      elapsedMs: performance.now() - this.started,
    };
  }

  /** Whatever happened: stops everything, waits for it, and flushes the logs. */
  private async settle(): Promise<void> {
    this.stopSampling = true;
    if (!this.stopper.signal.aborted) this.stopper.abort(new PolicyloopError('The run ended.'));
    await this.filling;
    await this.drain();
    // Closing twice is nothing: a run that finished closed it already, and reported its error.
    await this.environmentRun?.close().catch(() => undefined);
    await this.model.flushLogs().catch(() => undefined);
  }

  /** Waits for the launched batches (their results unused) and the background work. */
  private async drain(): Promise<void> {
    await Promise.all(this.queue.splice(0).map((pending) => pending.promise.catch(() => undefined)));
    while (this.background.size > 0) await Promise.all([...this.background]);
  }

  /** Runs background work; its first error stops the run and is rethrown by the loop. */
  private track(promise: Promise<unknown>): void {
    const settled = promise.then(
      () => undefined,
      (error: unknown) => {
        if (!this.stopper.signal.aborted) this.failure ??= { error };
        this.stopper.abort(error);
      },
    );
    this.background.add(settled);
    void settled.finally(() => this.background.delete(settled));
  }

  private throwFailure(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }

  private budgetReached(): RLStopReason | undefined {
    const budget = this.host.config.budget;
    if (budget === undefined) return undefined;
    if (budget.steps !== undefined && this.totals.steps >= budget.steps) return 'budget_steps';
    if (budget.seconds !== undefined && seconds(this.started) >= budget.seconds) return 'budget_seconds';
    if (budget.tokens !== undefined && this.totals.tokens >= budget.tokens) return 'budget_tokens';
    return undefined;
  }
}

/**
 * Groups in a row with nothing to learn from: equal rewards, or (left out) too few finished
 * rollouts. After `collapseAfter` of them the run stops with `NoLearningSignalError`, so a run
 * whose rollouts keep failing stops instead of sampling forever.
 */
class LearningSignal {
  private inARow = 0;
  private failedInARow = 0;

  /** Counts a checked batch's groups in order (stale ones do not count); throws at the limit. */
  observe(groups: readonly TrajectoryGroup[], checked: TrainingBatch, collapseAfter: number): void {
    const indexes = (reason: string) =>
      new Set(checked.dropped.filter((event) => event.reason === reason).flatMap((event) => event.groupIndexes));
    const stale = indexes('stale');
    const failed = indexes('failed_rollouts');
    for (const [index, group] of groups.entries()) {
      if (stale.has(index)) continue;
      if (!failed.has(index) && !hasZeroRewardVariance(group)) {
        this.inARow = 0;
        this.failedInARow = 0;
        continue;
      }
      if (failed.has(index)) this.failedInARow += 1;
      if (++this.inARow >= collapseAfter) throw new NoLearningSignalError(this.inARow, checked.step, this.failedInARow);
    }
  }
}

const seconds = (from: number, to: number = performance.now()): number => (to - from) / 1000;

/** Every item of `items`, in order. */
async function readAll<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

/**
 * An environment's training tasks epoch after epoch (each epoch a new read of its dataset), the
 * first `offset` skipped (a rerun resumes at its step's tasks, as an array of scenarios does). An
 * empty epoch ends it, so an empty dataset ends the run (`scenarios_exhausted`).
 */
async function* epochs<S>(environment: TrainerEnvironment<S>, offset: number): AsyncGenerator<S, void, undefined> {
  let skip = offset;
  for (;;) {
    let count = 0;
    for await (const task of environment.dataset()) {
      count += 1;
      if (skip > 0) skip -= 1;
      else yield task;
    }
    if (count === 0) return;
    skip %= count;
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

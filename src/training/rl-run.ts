/**
 * One run of an {@link RLTrainer}, in named pieces: the start (resume, first validation), the loop
 * (budget, next batch, one step), the sampler that launches batches ahead within
 * `maxStepsOffPolicy`, one step (drop groups, train, report), validation, retention, and the end
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
import { dropGroups } from './drop-groups.js';
import { NoLearningSignalError } from './errors.js';
import { metricByStep } from './history.js';
import type { GroupsDroppedEvent } from './model-events.js';
import { baselineRoute } from './prompted-model.js';
import type { RLStopReason, RLTrainerEvents, RLTrainerOptions, RLTrainerSummary, TrainerConfig } from './rl-trainer.js';
import { learningRateAt } from './schedules.js';
import { runWithPinnedSteps } from './step-pin.js';
import type { StepRoute } from './step-pin.js';
import type { TrainableModel } from './trainable-model.js';
import { hasZeroRewardVariance } from './training-input.js';

/** A batch of groups sampled for one step. */
interface SampledBatch {
  readonly groups: TrajectoryGroup[];
  readonly version: number;
  readonly seconds: number;
  /** Rollouts that failed for good, and failed attempts retried. */
  readonly failed: number;
  readonly retried: number;
}

/** A batch being sampled. */
interface PendingBatch {
  readonly version: number;
  readonly promise: Promise<SampledBatch>;
}

type Totals = { -readonly [K in keyof RLTrainerSummary['totals']]: number };

/** What a run needs of its trainer. */
export interface RunHost<S> {
  readonly options: RLTrainerOptions<S>;
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
  private consecutiveFlat = 0;
  private lastStepEnd = performance.now();
  private lastTrainEnd = this.started;
  private source: ScenarioSource<S> | undefined;
  private inferenceName = '';

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
      const stopReason = await this.loop();
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

  /** Finishes a step a killed run left, reads the step, and validates it unless a rerun did. */
  private async start(): Promise<number> {
    const { model, stopper } = this;
    await raceSignal(model.finishPendingJob({ signal: stopper.signal }), stopper.signal);
    this.latest = await model.getStep({ signal: stopper.signal });
    const startStep = this.latest;
    this.source = new ScenarioSource(this.host.options.scenarios, startStep * this.host.config.groupsPerStep);
    this.inferenceName = model.inferenceName();
    // A rerun does not validate a step again.
    const validated = (await model.history()).some(
      (row) => row.training_step === this.latest && Object.keys(row).some((name) => name.startsWith('val/')),
    );
    if (!validated) this.validate(this.latest);
    this.validateBaselines(startStep);
    this.lastStepEnd = performance.now();
    return startStep;
  }

  /** Steps until `maxSteps`, a budget, the scenarios' end or an abort; resolves with why it stopped. */
  private async loop(): Promise<RLStopReason> {
    while (this.latest < this.host.config.maxSteps) {
      this.throwFailure();
      if (this.stopper.signal.aborted) break;
      const limit = this.budgetReached();
      if (limit !== undefined) return limit;
      const batch = await this.nextBatch();
      if (batch === 'aborted') break;
      if (batch === 'exhausted') return 'scenarios_exhausted';
      await this.step(batch);
    }
    return 'max_steps';
  }

  /** The stalest batch, sampled: waits for the sampler when none is launched. */
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

  /** One step: leaves out groups that cannot train, trains the rest, reports, validates, prunes. */
  private async step(batch: SampledBatch): Promise<void> {
    const { config, options, events } = this.host;
    const step = this.latest;
    this.totals.rollouts += batch.groups.reduce((sum, group) => sum + group.trajectories.length, 0);
    this.totals.failedRollouts += batch.failed;
    const selected = this.selectGroups(batch, step);
    if (selected === undefined) {
      this.totals.skippedBatches += 1;
      this.training = false;
      return;
    }
    void this.fill();
    events.emit('step:start', {
      step,
      sampledStep: batch.version,
      groups: selected.groups.length,
      oldestPolicyVersion: batch.version,
    });
    const trainStart = performance.now();
    const idle = seconds(this.lastTrainEnd, trainStart);
    let result: Awaited<ReturnType<TrainableModel['train']>>;
    try {
      // No signal: an abort lets the job finish, so the step's row is written.
      const learningRate =
        config.learningRate === undefined
          ? undefined
          : learningRateAt(config.learningRate, step, { maxSteps: config.maxSteps });
      result = await this.model.train(selected.groups, {
        ...options.train,
        ...(learningRate === undefined ? {} : { learningRate }),
      });
    } finally {
      this.training = false;
    }
    this.lastTrainEnd = performance.now();
    this.latest = result.step;
    this.totals.steps += 1;
    void this.fill();
    const metrics: Record<string, number> = {
      ...result.metrics,
      'time/sample': batch.seconds,
      'time/train': seconds(trainStart, this.lastTrainEnd),
      'time/step': seconds(this.lastStepEnd, this.lastTrainEnd),
      'idle/service': idle,
      'rollouts/failed': batch.failed,
      'rollouts/retried': batch.retried,
      'groups/dropped_failed': selected.droppedFailed,
    };
    this.lastStepEnd = this.lastTrainEnd;
    events.emit('step:end', { step, sampledStep: batch.version, metrics });
    this.host.stream?.write(`${formatStepLine(step, config.maxSteps, metrics)}\n`);
    const { validation, keep } = config;
    if (validation !== undefined && this.latest % validation.every === 0 && !this.stopper.signal.aborted) {
      this.validate(this.latest);
    }
    if (keep !== undefined) await this.prune(false);
  }

  /**
   * The groups of a batch that train (stale ones and ones with too few finished rollouts left
   * out, each kind in one `groups:dropped`), or undefined when none has a learning signal. Stops
   * the run with `NoLearningSignalError` after `collapseAfter` equal-reward groups in a row.
   */
  private selectGroups(
    batch: SampledBatch,
    step: number,
  ): { groups: TrajectoryGroup[]; droppedFailed: number } | undefined {
    const { maxStepsOffPolicy, minGroupSize, collapseAfter } = this.host.config;
    const emit = (event: GroupsDroppedEvent): void => {
      this.host.events.emit('groups:dropped', event);
    };
    const context = { step, given: batch.groups, emit };
    const current = dropGroups(batch.groups, { reason: 'stale', maxStepsOffPolicy }, context);
    this.totals.droppedStale += current.dropped;
    // A group trains on the rollouts that finished, when enough of them did.
    const fresh = dropGroups(current.kept, { reason: 'failed_rollouts', minGroupSize }, context);
    this.totals.droppedFailed += fresh.dropped;
    for (const group of fresh.kept) {
      if (!hasZeroRewardVariance(group)) this.consecutiveFlat = 0;
      else if (++this.consecutiveFlat >= collapseAfter) throw new NoLearningSignalError(this.consecutiveFlat, step);
    }
    // Equal-reward groups still go to `train` (it leaves them out of the upload and counts them).
    const signal = dropGroups(fresh.kept, { reason: 'zero_variance' }, context);
    this.totals.droppedZeroVariance += signal.dropped;
    if (signal.kept.length === 0) return undefined;
    return { groups: fresh.kept, droppedFailed: fresh.dropped };
  }

  /**
   * The sampler: launches batches while the bound allows. A batch launched now trains no earlier
   * than after the ones ahead of it (queued, and the one training), so at most `maxStepsOffPolicy`
   * of those: with 0 it samples one batch at a time (the synchronous loop), with 1 or more,
   * rollouts for that many next steps run while a step trains (the pipelined loop).
   */
  private fill(): Promise<void> {
    this.filling ??= this.launch().finally(() => {
      this.filling = undefined;
    });
    return this.filling;
  }

  private async launch(): Promise<void> {
    const { maxStepsOffPolicy, maxSteps, groupsPerStep } = this.host.config;
    const source = this.source as ScenarioSource<S>;
    for (;;) {
      const ahead = this.queue.length + (this.training ? 1 : 0);
      const stepsLeft = maxSteps - this.latest;
      if (this.stopSampling || this.exhausted || this.stopper.signal.aborted) return;
      if (ahead > maxStepsOffPolicy || ahead >= stepsLeft) return;
      const scenarios = await source.take(groupsPerStep);
      // An async iterable may have taken a while: nothing starts once the run is ending.
      if (this.stopSampling || this.stopper.signal.aborted) return;
      if (scenarios.length === 0) {
        this.exhausted = true;
        return;
      }
      this.queue.push(this.sampleBatch(scenarios, this.latest));
    }
  }

  /** Starts the rollouts of one batch at `version`. */
  private sampleBatch(scenarios: readonly S[], version: number): PendingBatch {
    const startedAt = performance.now();
    const counts = { failed: 0, retried: 0 };
    const events = new GatherEmitter<S>();
    events.on('rollout:error', ({ groupIndex, index, attempt, error, willRetry }) => {
      if (willRetry) counts.retried += 1;
      else counts.failed += 1;
      this.host.events.emit('rollout:failed', { sampledStep: version, groupIndex, index, attempt, error, willRetry });
    });
    const { groupSize } = this.host.config;
    const promise = this.gather(scenarios, groupSize, version, { step: version }, this.sampling.signal, events).then(
      (groups) => ({ groups, version, seconds: seconds(startedAt), ...counts }),
    );
    promise.catch(() => undefined);
    return { version, promise };
  }

  /** Gathers groups with the model's requests routed to `route` (a step, or a baseline). */
  private gather(
    scenarios: readonly S[],
    size: number,
    version: number,
    route: StepRoute,
    gatherSignal: AbortSignal,
    events?: GatherEmitter<S>,
  ): Promise<TrajectoryGroup[]> {
    const { options } = this.host;
    const onTokens = (tokens: number): void => {
      this.totals.tokens += tokens;
    };
    return runWithPinnedSteps({ routes: new Map([[this.inferenceName, route]]), onTokens }, () =>
      gatherTrajectoryGroups(scenarios, options.rollout, {
        // A rollout that throws costs that rollout: retried once, then kept in its group.
        maxRetries: 1,
        maxExceptions: 0.25,
        ...options.gather,
        ...(events === undefined ? {} : { events }),
        groupSize: size,
        ...(options.reward === undefined ? {} : { reward: options.reward }),
        ...(options.scoreGroup === undefined ? {} : { scoreGroup: options.scoreGroup }),
        policyVersion: () => version,
        signal: gatherSignal,
      }),
    );
  }

  /** Validates `step` in the background (`val/*` row, `validation:end`), then prunes. */
  private validate(step: number): void {
    const validation = this.host.config.validation;
    if (validation === undefined) return;
    this.validating.add(step);
    const work = async (): Promise<void> => {
      try {
        const groups = await this.gather(
          validation.scenarios,
          validation.groupSize,
          step,
          { step },
          this.stopper.signal,
        );
        const row = await this.model.log(groups, { split: 'val', step });
        this.host.events.emit('validation:end', { step, model: this.model.name, metrics: numericMetrics(row) });
      } finally {
        this.validating.delete(step);
      }
      await this.prune(false);
    };
    this.track(work());
  }

  /** Scores each baseline once, at the start step, with the validation rollouts. */
  private validateBaselines(startStep: number): void {
    const validation = this.host.config.validation;
    for (const baseline of validation?.baselines ?? []) {
      const work = async (): Promise<void> => {
        const groups = await this.gather(
          validation?.scenarios ?? [],
          validation?.groupSize ?? 1,
          startStep,
          baselineRoute(baseline),
          this.stopper.signal,
        );
        const row = await baseline.log(groups, { split: 'val', step: startStep });
        this.host.events.emit('validation:end', {
          step: startStep,
          model: baseline.name,
          metrics: numericMetrics(row),
        });
      };
      this.track(work());
    }
  }

  /** Deletes checkpoints `keep` does not keep, sparing the ones still sampled from. */
  private async prune(final: boolean): Promise<void> {
    const keep = this.host.config.keep;
    if (keep === undefined) return;
    const keepBestBy = keep.best ? keep.metric : null;
    if (keepBestBy !== null) {
      // Nothing is deleted before the metric exists at a checkpoint (step >= 1).
      const values = metricByStep(await this.model.history(), keepBestBy);
      if (![...values.keys()].some((step) => step >= 1 && step <= this.latest)) return;
    }
    const sampledFrom = final ? [] : [...this.queue.map((batch) => batch.version), ...this.validating];
    await this.model.pruneCheckpoints({
      keepBestBy,
      ...(keep.direction === undefined ? {} : { direction: keep.direction }),
      keepLatest: final ? keep.latest : true,
      keepSteps: sampledFrom,
    });
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
    await model.flushLogs();
    const best = await this.best();
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

  /** The best step by the keep metric in the history (ties go to the later step, as in retention). */
  private async best(): Promise<{ step: number | null; value: number | null }> {
    const keep = this.host.config.keep;
    const metric = keep?.metric ?? 'val/reward';
    const better = keep?.direction === 'min' ? (a: number, b: number) => a <= b : (a: number, b: number) => a >= b;
    let step: number | null = null;
    let value: number | null = null;
    const values = [...metricByStep(await this.model.history(), metric)].sort(([a], [b]) => a - b);
    for (const [at, metricValue] of values) {
      if (value === null || better(metricValue, value)) {
        step = at;
        value = metricValue;
      }
    }
    return { step, value };
  }
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

/**
 * Runs N scenarios x G rollouts into `TrajectoryGroup`s: bounded concurrency, per-attempt timeout
 * and retries, rewards, an exception budget, cancellation, policy-version stamps and typed events.
 */
import { setMaxListeners } from 'node:events';
// Node's own, not the global a test's fake timers replace: the gather's turns are not a timer.
import { setImmediate } from 'node:timers';
import { z } from 'zod';
import { abortReason, delay, isPromiseLike, raceSignal } from '../internal/delay.js';
import { backoffDelay } from '../internal/backoff.js';
import { isRetryableError, PolicyloopError, userAbortError } from '../internal/errors.js';
import { describeValue } from '../internal/describe-value.js';
import { formatPath, valueAtPath } from '../internal/format-issues.js';
import { option, optionsSchema, parseOptions, parseValue } from '../internal/option-schema.js';
import { toRewardFn, type RewardSpec } from '../rewards/combine-rewards.js';
import { evaluateRewardNow, type RewardFn } from '../rewards/reward-function.js';
import { fastParseTrajectory } from '../schema/fast-parse.js';
import { Trajectory, type TrajectoryException, type TrajectoryGroup, type TrajectoryInput } from '../schema/index.js';
import { GatherEmitter, type GatherEventMap } from './gather-events.js';
import { attachProgressBar } from './progress-bar.js';
import {
  ExceptionBudgetExceededError,
  InvalidTrajectoryError,
  RolloutTimeoutError,
  toTrajectoryException,
} from './rollout-errors.js';
import { type EndpointModel, GatherEndpoint, type RolloutEndpoint } from './endpoint/rollout-endpoint.js';
import type { RolloutContext, RolloutFn } from './rollout-function.js';
import { closeRolloutScope, openRolloutScope, type RolloutScope } from './rollout-scope.js';
import { TrajectoryRecorder, takeTrajectory, UNPARSED_TOOL_CALLS } from './trajectory-recorder.js';

/** What a group scorer gets besides the group. */
export interface GroupScorerContext<S> {
  /** The group's scenario. */
  readonly scenario: S;
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** Aborts when the gather stops or the scorer outlives the gather's `timeout`. */
  readonly signal: AbortSignal;
}

/**
 * Scores a finished group as a whole (e.g. `relativeJudge`): may change rewards, metrics and logs
 * in place, or return a new group. A throw, or running past the gather's `timeout`, stops the
 * gather with that error (never a silently dropped group).
 */
export type GroupScorer<S> = (
  group: TrajectoryGroup,
  context: GroupScorerContext<S>,
  // biome-ignore lint/suspicious/noConfusingVoidType: a scorer may return nothing (it changed the group in place)
) => TrajectoryGroup | void | Promise<TrajectoryGroup | void>;

/** Options of {@link gatherTrajectoryGroups}. */
export interface GatherOptions<S> {
  /**
   * Rollouts per scenario (G). RL needs more than one to compare.
   * @default 1
   */
  groupSize?: number | undefined;
  /**
   * Rollouts running at once, across all groups.
   * @default 8
   */
  concurrency?: number | undefined;
  /**
   * Limit of one attempt (rollout + reward), and of each `scoreGroup` call, in milliseconds;
   * `Infinity` for none.
   * @default 300000
   */
  timeout?: number | undefined;
  /**
   * Retries of a failed rollout after its first attempt (timeouts and errors that may pass; not
   * reward-function errors, invalid trajectories, or non-retryable 4xx API errors).
   * @default 0
   */
  maxRetries?: number | undefined;
  /**
   * Wait before the first retry, in milliseconds; doubles with each further one (capped at 8 s,
   * or at `retryDelay` when longer), less up to 25 % jitter.
   * @default 1000
   */
  retryDelay?: number | undefined;
  /**
   * The exception budget: how many rollouts may fail for good (after retries) and be kept in
   * `group.exceptions`. A number >= 1 (or 0) is a count; a number between 0 and 1 is a fraction
   * of all rollouts. One more failure stops the gather with an `ExceptionBudgetExceededError`.
   * @default 0
   */
  maxExceptions?: number | undefined;
  /**
   * The reward of each trajectory, computed right after its rollout (inside its timeout and its
   * failure accounting): a function, or named functions summed by `combineRewards`.
   */
  reward?: RewardSpec<S> | undefined;
  /** Scores each finished group as a whole (after `reward`), e.g. `relativeJudge({...})`. */
  scoreGroup?: GroupScorer<S> | undefined;
  /**
   * The step of the policy the rollouts sample from (the model's step, e.g. `() => model.getStep()`):
   * read when each rollout starts, its sampled step, stamped as `initial_policy_version`, and when
   * it ends, stamped as `final_policy_version` (unless the rollout set them).
   * Every trajectory also gets its `start_time` (ISO 8601) unless the rollout set one.
   */
  sampledStep?: (() => number | Promise<number>) | undefined;
  /**
   * Aborts the gather: rollouts still running see their signal abort (with the signal's reason),
   * and the gather rejects with `APIUserAbortError` (its `cause` is the reason).
   */
  signal?: AbortSignal | undefined;
  /** Receives the gather's typed events. */
  events?: GatherEmitter<S> | undefined;
  /**
   * The model `context.endpoint` forwards to (a `PromptedModel` or `TrainableModel`): with it,
   * each rollout may ask for an OpenAI- and Anthropic-compatible endpoint of its own, for an agent
   * in another process, whose calls are recorded into the rollout's trajectory. `RLTrainer` passes
   * its model. The endpoint's listener starts with the first gather that has one and closes with
   * the last.
   */
  model?: EndpointModel | undefined;
  /**
   * Draws a progress bar on stderr, only when stderr is a terminal.
   * @default false
   */
  progress?: boolean | undefined;
}

/** A rollout that failed for good, as its group keeps it. */
class Failed {
  constructor(readonly exception: TrajectoryException) {}
}

/** How a rollout ended: its trajectory, its failure, or undefined when the gather stopped first. */
type Outcome = Trajectory | Failed | undefined;

/**
 * One attempt of one rollout: its signal, its recorder, its timer, and how to reject it. One object
 * with methods rather than closures per attempt (the runner makes one per rollout); it is also the
 * rollout's capture scope (its recorder and signal).
 */
class Attempt<S> implements RolloutScope {
  readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  readonly recorder = new TrajectoryRecorder();
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  /** Rejects the attempt's promise (set when it is made). */
  reject: (reason: unknown) => void = ignore;
  /** The rollout's endpoint, once the rollout asked for it (`context.endpoint`), and how to end it. */
  endpoint: RolloutEndpoint | undefined = undefined;
  endEndpoint: () => void = ignore;

  constructor(
    readonly scenario: S,
    readonly groupIndex: number,
    readonly index: number,
    readonly attempt: number,
  ) {
    // The rollout's requests each listen on this signal: without this, Node prints a
    // MaxListenersExceededWarning on stderr past 10 of them.
    setMaxListeners(Number.POSITIVE_INFINITY, this.signal);
  }

  /** The attempt settled: its timer stops, `running` forgets it, its recorder records no more. */
  finish(running: Set<Attempt<S>>): void {
    clearTimeout(this.timer);
    running.delete(this);
    this.recorder.close();
    this.endEndpoint();
  }

  /** Aborts the attempt's signal with `reason` and rejects the attempt with it, whatever the rollout does with the signal. */
  abort(reason: unknown): void {
    this.controller.abort(reason);
    this.reject(reason);
  }
}

/**
 * What a rollout function gets besides its scenario: its attempt's signal, recorder and place, and
 * `endpoint`, made when the rollout first asks for it.
 */
class AttemptContext<S> implements RolloutContext {
  readonly signal: AbortSignal;
  readonly trajectory: TrajectoryRecorder;
  readonly index: number;
  readonly groupIndex: number;
  readonly attempt: number;
  readonly #attempt: Attempt<S>;
  readonly #endpoints: GatherEndpoint | undefined;

  constructor(attempt: Attempt<S>, endpoints: GatherEndpoint | undefined) {
    this.signal = attempt.signal;
    this.trajectory = attempt.recorder;
    this.index = attempt.index;
    this.groupIndex = attempt.groupIndex;
    this.attempt = attempt.attempt;
    this.#attempt = attempt;
    this.#endpoints = endpoints;
  }

  get endpoint(): RolloutEndpoint {
    const attempt = this.#attempt;
    if (attempt.endpoint !== undefined) return attempt.endpoint;
    if (this.#endpoints === undefined) {
      throw new PolicyloopError(
        'context.endpoint needs a model to forward to: pass `model` to gatherTrajectoryGroups (an RLTrainer passes its own)',
      );
    }
    if (attempt.recorder.closed) {
      throw new PolicyloopError(
        `context.endpoint was asked for after rollout ${attempt.index} of group ${attempt.groupIndex} ended`,
      );
    }
    const { endpoint, end } = this.#endpoints.openRollout(attempt);
    attempt.endpoint = endpoint;
    attempt.endEndpoint = end;
    return endpoint;
  }
}

/** Does nothing: the default of a rejecter not yet set, and the handler of a rejection observed elsewhere. */
function ignore(): void {}

/** An attempt's timer ran out: it aborts with a {@link RolloutTimeoutError}. */
function timeOut(attempt: Attempt<unknown>, timeout: number): void {
  attempt.abort(new RolloutTimeoutError(timeout));
}

/**
 * The check of {@link GatherOptions}, with the defaults; parsed once per gather, before anything
 * runs (the fields typed with `S` are checked for their kind: the scenario type is the caller's).
 */
const GatherOptionsSchema = optionsSchema<GatherOptions<unknown>>()({
  groupSize: option.integer({ min: 1 }).default(1),
  concurrency: option.integer({ min: 1 }).default(8),
  timeout: option.timeout({ allowInfinity: true }).default(300_000),
  maxRetries: option.retryCount().default(0),
  retryDelay: option.retryDelay().default(1000),
  // A count (>= 1 or 0) or a fraction (between 0 and 1): any finite number >= 0.
  maxExceptions: option.number({ min: 0 }).default(0),
  reward: option
    .like<RewardSpec<unknown>>(
      (reward) => typeof reward === 'function' || (typeof reward === 'object' && reward !== null),
      'a function, or named reward functions (as `combineRewards` takes)',
    )
    .optional(),
  scoreGroup: option.function<GroupScorer<unknown>>().optional(),
  sampledStep: option.function<() => number | Promise<number>>().optional(),
  signal: option.signal().optional(),
  events: option
    .like<GatherEmitter<unknown>>((events) => typeof events?.emit === 'function', 'a GatherEmitter')
    .optional(),
  model: option
    .like<EndpointModel>(
      (model) => typeof model?.fetch === 'function' && typeof model.inferenceName === 'function',
      'a PromptedModel or TrainableModel (with `fetch()` and `inferenceName()`)',
    )
    .optional(),
  progress: z.boolean().default(false),
});

/** The recorded trajectory with what the rollout returned laid over it, validated. */
function buildTrajectory(recorded: TrajectoryInput, returned: unknown): Trajectory {
  let merged: unknown = recorded;
  if (returned === undefined) {
    // The recorded trajectory is a fresh copy the runner owns: the fast path may use it as the result.
    const fast = fastParseTrajectory(recorded);
    if (fast !== undefined) return fast;
  } else {
    if (typeof returned !== 'object' || returned === null || Array.isArray(returned)) {
      throw new InvalidTrajectoryError(
        `Expected the rollout to return a trajectory object or nothing, got ${describeValue(returned)}`,
        [],
      );
    }
    const fields = returned as TrajectoryInput;
    merged = {
      ...recorded,
      ...fields,
      metrics: { ...recorded.metrics, ...fields.metrics },
      metadata: { ...recorded.metadata, ...fields.metadata },
    };
  }
  const parsed = Trajectory.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue
      ? `${formatPath(issue.path)}: ${issue.message}, got ${describeValue(valueAtPath(merged, issue.path))}`
      : '';
    throw new InvalidTrajectoryError(`The rollout produced an invalid trajectory (${where})`, parsed.error.issues);
  }
  return parsed.data;
}

/**
 * What a gather runs with: the checked options, the rollout and the reward function, and the
 * options a gather reads once when it starts (so that changing the options object later changes
 * nothing).
 */
type GatherPlan<S> = Readonly<Omit<z.output<typeof GatherOptionsSchema>, 'reward' | 'scoreGroup' | 'events'>> & {
  readonly rollout: RolloutFn<S>;
  readonly reward: RewardFn<S> | undefined;
  readonly scoreGroup: GroupScorer<S> | undefined;
  readonly events: GatherEmitter<S> | undefined;
};

/** A rollout that failed for good, with the error it failed with (the exception budget's evidence). */
interface Failure {
  readonly exception: TrajectoryException;
  readonly error: unknown;
}

/**
 * One gather, in named pieces: the workers that take the rollouts in order (`execute`, `worker`),
 * one rollout with its retries (`runRollout`), one attempt with its timeout (`startAttempt`, `work`),
 * a rollout's end (`succeeded`, or `failed` against the exception budget), one group with its
 * scoring (`settleRollout`, `runGroup`, `scoreGroup`), stopping (`stop`, `onAbort`) and the events
 * (`emit`, `progress`). The gather's state lives here, one object a gather; nothing is allocated
 * per rollout beyond what the gather always made (its attempt, its promise, its trajectory).
 */
class GatherRun<S> {
  private readonly list: readonly S[];
  private readonly plan: GatherPlan<S>;
  private readonly total: number;
  private readonly events: GatherEmitter<S>;
  private readonly controller = new AbortController();
  /** The running attempts: `stop` aborts them (cheaper than a listener each on the gather's signal). */
  private readonly running = new Set<Attempt<S>>();
  private stopped = false;
  private warnedUnparsed = false;
  private rejectGather: (error: unknown) => void = ignore;
  /** Rejects once the gather stops, with the error it stopped with. */
  private readonly stoppedEarly: Promise<never>;
  // Progress: rollouts settled, failed for good, and finished with their reward sum.
  private done = 0;
  private failedCount = 0;
  private finished = 0;
  private rewardSum = 0;
  private readonly failures: Failure[] = [];
  /** The next rollout a worker takes (its position: group by group). */
  private next = 0;
  /** Each group's outcomes, its rollouts not yet settled, and what settles it. */
  private readonly outcomes: Outcome[][];
  private readonly remaining: number[];
  private readonly settleGroup: Array<(outcomes: Outcome[]) => void> = [];
  /** Settles in the event loop's next check phase; shared by every worker that waits for it (see {@link worker}). */
  private turn: Promise<void> | undefined = undefined;
  /** The rollouts' endpoints (with a `model` to forward to), open while the gather runs. */
  private endpoints: GatherEndpoint | undefined = undefined;

  /** A gather of `groupSize` rollouts of every scenario in `list`, as `plan` says. */
  constructor(list: readonly S[], plan: GatherPlan<S>) {
    this.list = list;
    this.plan = plan;
    this.total = list.length * plan.groupSize;
    this.events = plan.events ?? new GatherEmitter<S>();
    // Every running attempt listens on the gather's signal: without this, Node prints a
    // MaxListenersExceededWarning on stderr past 10 concurrent rollouts.
    setMaxListeners(Number.POSITIVE_INFINITY, this.controller.signal);
    this.stoppedEarly = new Promise<never>((_resolve, reject) => {
      this.rejectGather = reject;
    });
    this.stoppedEarly.catch(ignore);
    this.outcomes = list.map(() => new Array<Outcome>(plan.groupSize));
    this.remaining = list.map(() => plan.groupSize);
  }

  /**
   * Runs the gather to its end: the groups in scenario order, or the error it stopped with (the
   * caller's abort, the exception budget, a group scorer's or an event listener's throw).
   */
  async execute(): Promise<TrajectoryGroup[]> {
    const { signal } = this.plan;
    signal?.addEventListener('abort', this.onAbort, { once: true });
    const detachBar =
      this.plan.progress && process.stderr.isTTY ? attachProgressBar(this.events, process.stderr) : undefined;
    try {
      if (this.plan.model !== undefined) this.endpoints = await GatherEndpoint.open(this.plan.model);
      // `concurrency` workers take the rollouts in order (group by group), each from the gather's own
      // async context; a group is scored and reported once its last rollout settled.
      const groupsDone = this.list.map((scenario, groupIndex) =>
        new Promise<Outcome[]>((resolve) => {
          this.settleGroup[groupIndex] = resolve;
        }).then((settled) => this.runGroup(scenario, groupIndex, settled)),
      );
      for (let count = 0; count < Math.min(this.plan.concurrency, this.total); count += 1)
        this.worker().catch((error: unknown) => this.stop(error));
      const all = Promise.all(groupsDone);
      all.catch(ignore);
      const groups = await Promise.race([all, this.stoppedEarly]);
      if (this.stopped) await this.stoppedEarly;
      return groups;
    } catch (error) {
      this.stop(error);
      throw error;
    } finally {
      signal?.removeEventListener('abort', this.onAbort);
      detachBar?.();
      await this.endpoints?.close();
    }
  }

  /** Stops everything: the rollouts see `reason` on their signal, the gather rejects with `error`. */
  private stop(error: unknown, reason: unknown = error): void {
    if (this.stopped) return;
    this.stopped = true;
    this.controller.abort(reason);
    for (const attempt of this.running) attempt.abort(reason);
    this.rejectGather(error);
  }

  /** The caller's signal aborted: stop with an `APIUserAbortError` (its `cause` is the signal's reason). */
  private readonly onAbort = (): void => {
    const { signal } = this.plan;
    this.stop(userAbortError(signal, 'The gather'), abortReason(signal));
  };

  /** Emits one event; a throwing listener stops the gather with its error. */
  private emit<K extends keyof GatherEventMap<S>>(name: K, payload: Parameters<GatherEventMap<S>[K]>[0]): void {
    try {
      (this.events.emit as (event: K, payload: unknown) => boolean)(name, payload);
    } catch (error) {
      // A throwing listener is the caller's bug: stop visibly rather than lose rollouts.
      this.stop(error);
    }
  }

  /** Whether an event has listeners (an emitter that cannot say is assumed to listen). */
  private heard(name: keyof GatherEventMap<S>): boolean {
    return typeof this.events.listenerCount !== 'function' || this.events.listenerCount(name) > 0;
  }

  /** Emits `progress` after a rollout settled, built only when someone listens (it runs after every rollout). */
  private progress(): void {
    if (!this.heard('progress')) return;
    this.emit('progress', {
      done: this.done,
      total: this.total,
      failed: this.failedCount,
      rewardMean: this.finished === 0 ? Number.NaN : this.rewardSum / this.finished,
    });
  }

  /**
   * One worker: takes the next rollout in order until none is left or the gather stopped. Between
   * two rollouts it waits for the event loop's next turn, where every worker freed in this turn
   * starts its next rollout together with the others: the requests of one turn are then sent in
   * one stretch instead of each inside the handling of the response before it, which costs the
   * HTTP client, the SDK and the runner markedly less CPU per rollout (bench/runner.ts; see
   * docs/performance.md). And rollouts that never wait for I/O no longer hold the event loop
   * (timers, I/O, other work) until the whole gather ends.
   */
  private async worker(): Promise<void> {
    const { groupSize } = this.plan;
    while (!this.stopped && this.next < this.total) {
      const position = this.next;
      this.next += 1;
      const groupIndex = Math.floor(position / groupSize);
      const index = position % groupSize;
      const outcome = await this.runRollout(this.list[groupIndex] as S, groupIndex, index);
      this.settleRollout(groupIndex, index, outcome);
      if (!this.stopped && this.next < this.total) await this.nextTurn();
    }
  }

  /** Settles in the event loop's next check phase (after its I/O); one promise for all who ask before then. */
  private nextTurn(): Promise<void> {
    this.turn ??= new Promise<void>((resolve) => {
      setImmediate(() => {
        this.turn = undefined;
        resolve();
      });
    });
    return this.turn;
  }

  /** Keeps a rollout's outcome in its group, and settles the group when it was the group's last. */
  private settleRollout(groupIndex: number, index: number, outcome: Outcome): void {
    const outcomes = this.outcomes[groupIndex] as Outcome[];
    outcomes[index] = outcome;
    const remaining = (this.remaining[groupIndex] as number) - 1;
    this.remaining[groupIndex] = remaining;
    if (remaining === 0) this.settleGroup[groupIndex]?.(outcomes);
  }

  /**
   * One rollout: attempts until one finishes, or one fails and may not be retried (then it counts
   * against the exception budget); undefined when the gather stopped first.
   */
  private async runRollout(scenario: S, groupIndex: number, index: number): Promise<Outcome> {
    for (let attempt = 0; ; attempt += 1) {
      if (this.stopped) return undefined;
      if (this.heard('rollout:start')) this.emit('rollout:start', { groupIndex, index, attempt });
      const current = new Attempt(scenario, groupIndex, index, attempt);
      try {
        const trajectory = await this.startAttempt(current);
        current.finish(this.running);
        return this.succeeded(current, trajectory);
      } catch (error) {
        current.finish(this.running);
        if (this.stopped) return undefined;
        const exception = toTrajectoryException(error);
        const willRetry = attempt < this.plan.maxRetries && isRetryableError(error, true);
        this.emit('rollout:error', { groupIndex, index, attempt, error, exception, willRetry });
        if (!willRetry) return this.failed(exception, error);
        if (!(await this.backOff(attempt))) return undefined;
      }
    }
  }

  /**
   * Starts an attempt under its timeout: one promise settled by whichever comes first, the work or
   * an abort (the gather stopped, or the attempt timed out). Both sources are ours, so they reject
   * it directly.
   */
  private startAttempt(attempt: Attempt<S>): Promise<Trajectory> {
    const { timeout } = this.plan;
    this.running.add(attempt);
    if (Number.isFinite(timeout)) attempt.timer = setTimeout(timeOut, timeout, attempt, timeout);
    return new Promise<Trajectory>((resolve, reject) => {
      attempt.reject = reject;
      this.work(attempt).then(resolve, reject);
    });
  }

  /** What an attempt does: run the rollout in its scope, then stamp, validate and score its trajectory. */
  private async work(attempt: Attempt<S>): Promise<Trajectory> {
    const { recorder, scenario } = attempt;
    const { sampledStep } = this.plan;
    const startTime = new Date().toISOString();
    // Read twice per rollout: an answer given at once (`() => model.getStep()`) skips the microtask queue.
    const initialRead = sampledStep?.();
    const initialStep = isPromiseLike(initialRead) ? await initialRead : initialRead;
    const context = new AttemptContext(attempt, this.endpoints);
    // The attempt is the rollout's capture scope; the scope closes once what the rollout returned settled.
    const started = openRolloutScope(attempt, this.plan.rollout, scenario, context);
    let returned: unknown;
    try {
      returned = isPromiseLike(started) ? await started : started;
    } finally {
      closeRolloutScope();
    }
    recorder.close();
    attempt.endEndpoint();
    const finalRead = sampledStep?.();
    const finalStep = isPromiseLike(finalRead) ? await finalRead : finalRead;
    const trajectory = buildTrajectory(recorder[takeTrajectory](), returned);
    trajectory.start_time ??= startTime;
    if (initialStep !== undefined) trajectory.initial_policy_version ??= initialStep;
    if (finalStep !== undefined) trajectory.final_policy_version ??= finalStep;
    const { reward } = this.plan;
    if (reward !== undefined) {
      const value = evaluateRewardNow(reward, trajectory, scenario);
      trajectory.reward = isPromiseLike(value) ? await value : value;
    }
    return trajectory;
  }

  /** An attempt finished: counted and reported (`rollout:end`, `progress`); undefined when the gather stopped meanwhile. */
  private succeeded(attempt: Attempt<S>, trajectory: Trajectory): Outcome {
    if (this.stopped) return undefined;
    this.done += 1;
    this.finished += 1;
    this.rewardSum += trajectory.reward;
    const unparsed = trajectory.metrics?.[UNPARSED_TOOL_CALLS];
    if (!this.warnedUnparsed && typeof unparsed === 'number' && unparsed > 0) {
      this.warnedUnparsed = true;
      if (this.heard('rollout:warning'))
        this.emit('rollout:warning', {
          code: 'unparsed_tool_call',
          message: `A reply held tool-call markup (${unparsedFormats(trajectory)}) that the engine does not parse for this model, so it stayed text: the model writes another family's tool-call format, or a malformed call. Counted per trajectory in the \`${UNPARSED_TOOL_CALLS}\` metric; said once per gather.`,
          groupIndex: attempt.groupIndex,
          index: attempt.index,
          trajectory,
        });
    }
    if (this.heard('rollout:end')) {
      this.emit('rollout:end', {
        groupIndex: attempt.groupIndex,
        index: attempt.index,
        attempt: attempt.attempt,
        trajectory,
      });
    }
    this.progress();
    return trajectory;
  }

  /** Waits before retry `attempt + 1`; false when the gather stopped meanwhile. */
  private async backOff(attempt: number): Promise<boolean> {
    try {
      await delay(backoffDelay(attempt + 1, this.plan.retryDelay), this.controller.signal);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A rollout failed for good: counted, reported (`progress`) and kept for its group, or, one past
   * the exception budget, the gather stops with an {@link ExceptionBudgetExceededError} (undefined).
   */
  private failed(exception: TrajectoryException, error: unknown): Outcome {
    this.done += 1;
    this.failedCount += 1;
    this.failures.push({ exception, error });
    this.progress();
    const { maxExceptions } = this.plan;
    if (!this.overBudget(this.failures.length)) return new Failed(exception);
    this.stop(
      new ExceptionBudgetExceededError({
        exceptions: this.failures.map((failure) => failure.exception),
        errors: this.failures.map((failure) => failure.error),
        maxExceptions,
        total: this.total,
      }),
    );
    return undefined;
  }

  /** Whether `count` failures exceed `maxExceptions` (a count, or a fraction of all rollouts). */
  private overBudget(count: number): boolean {
    const { maxExceptions } = this.plan;
    return maxExceptions > 0 && maxExceptions < 1 ? count / this.total > maxExceptions : count > maxExceptions;
  }

  /** One group, once its last rollout settled: built from its outcomes, scored, and reported (`group:end`). */
  private async runGroup(scenario: S, groupIndex: number, outcomes: readonly Outcome[]): Promise<TrajectoryGroup> {
    const trajectories: Trajectory[] = [];
    const exceptions: TrajectoryException[] = [];
    for (const outcome of outcomes) {
      if (outcome === undefined) continue;
      if (outcome instanceof Failed) exceptions.push(outcome.exception);
      else trajectories.push(outcome);
    }
    let group: TrajectoryGroup = { trajectories, exceptions };
    const { scoreGroup } = this.plan;
    if (scoreGroup !== undefined && trajectories.length > 0 && !this.stopped) {
      group = await this.scoreGroup(scoreGroup, group, scenario, groupIndex);
    }
    if (!this.stopped) this.emit('group:end', { groupIndex, scenario, group });
    return group;
  }

  /**
   * Runs the group scorer under the gather's `timeout` and its stop (both abort the scorer's signal
   * and reject): the group it returned, or the same group when it returned nothing.
   */
  private async scoreGroup(
    scoreGroup: GroupScorer<S>,
    group: TrajectoryGroup,
    scenario: S,
    groupIndex: number,
  ): Promise<TrajectoryGroup> {
    const { controller } = this;
    const { timeout } = this.plan;
    const scoring = new AbortController();
    const onStop = (): void => scoring.abort(controller.signal.reason);
    controller.signal.addEventListener('abort', onStop, { once: true });
    const timer = Number.isFinite(timeout)
      ? setTimeout(() => scoring.abort(new RolloutTimeoutError(timeout, `scoreGroup of group ${groupIndex}`)), timeout)
      : undefined;
    try {
      const scored = await raceSignal(
        Promise.resolve(scoreGroup(group, { scenario, groupIndex, signal: scoring.signal })),
        scoring.signal,
      );
      return scored || group;
    } finally {
      clearTimeout(timer);
      controller.signal.removeEventListener('abort', onStop);
    }
  }
}

/**
 * Runs `groupSize` rollouts of every scenario and returns one `TrajectoryGroup` per scenario, in
 * scenario order (trajectories in rollout order). Each rollout runs in its own capture scope, so
 * completions made through a `captureCompletions` client are recorded into its trajectory; then the
 * `reward` scores it. A rollout that throws, times out, returns an invalid trajectory or whose
 * reward throws is retried (when retryable) and then kept in `group.exceptions` while within
 * `maxExceptions`; past it the gather aborts the rest and rejects with `ExceptionBudgetExceededError`.
 * A bad option, or a key that is no option, rejects with `InvalidArgumentError` before anything runs.
 * @example
 * const groups = await gatherTrajectoryGroups(scenarios, rollout, {
 *   groupSize: 4,
 *   concurrency: 8,
 *   reward: { correct: exactMatch((scenario) => scenario.answer) },
 *   maxExceptions: 0.1,
 *   sampledStep: () => model.getStep(),
 *   progress: true,
 * });
 */
export async function gatherTrajectoryGroups<S>(
  scenarios: Iterable<S>,
  rollout: RolloutFn<S>,
  gatherOptions?: GatherOptions<S>,
): Promise<TrajectoryGroup[]> {
  const options = parseOptions(GatherOptionsSchema, gatherOptions);
  parseValue('rollout', option.function(), rollout);
  parseValue(
    'scenarios',
    option.like<Iterable<S>>(
      (value) => typeof value?.[Symbol.iterator] === 'function',
      'an iterable (an array of scenarios)',
    ),
    scenarios,
  );
  if (options.signal?.aborted) throw userAbortError(options.signal, 'The gather');
  const list = Array.from(scenarios);
  // Every field named, so that each gather's plan has one shape: the run reads it on every rollout.
  const { groupSize, concurrency, timeout, maxRetries, retryDelay, maxExceptions, progress } = options;
  const { sampledStep, signal, model } = options;
  return new GatherRun(list, {
    groupSize,
    concurrency,
    timeout,
    maxRetries,
    retryDelay,
    maxExceptions,
    progress,
    sampledStep,
    signal,
    model,
    rollout,
    // The schema checked their kind; their scenario type is the caller's `S`.
    reward: options.reward === undefined ? undefined : toRewardFn(options.reward as RewardSpec<S>),
    scoreGroup: options.scoreGroup as GroupScorer<S> | undefined,
    events: options.events as GatherEmitter<S> | undefined,
  }).execute();
}

/** The families of the unparsed tool-call markup in a trajectory's replies (`mistral`, `hermes`, ...). */
function unparsedFormats(trajectory: Trajectory): string {
  const families = new Set<string>();
  for (const item of trajectory.messages_and_choices ?? []) {
    const family = (item as { unparsed_tool_call?: unknown }).unparsed_tool_call;
    if (typeof family === 'string') families.add(family);
  }
  return [...families].join(', ') || 'unknown';
}

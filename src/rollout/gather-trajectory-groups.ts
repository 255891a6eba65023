/**
 * Runs N scenarios x G rollouts into `TrajectoryGroup`s: bounded concurrency, per-attempt timeout
 * and retries, rewards, an exception budget, cancellation, policy-version stamps and typed events.
 */
import { setMaxListeners } from 'node:events';
import { abortReason, delay, isPromiseLike, raceSignal } from '../internal/delay.js';
import { backoffDelay } from '../internal/backoff.js';
import { isRetryableError, userAbortError } from '../internal/errors.js';
import { describeValue } from '../internal/describe-value.js';
import { formatPath, valueAtPath } from '../internal/format-issues.js';
import {
  booleanOption,
  functionOption,
  integerOption,
  invalidOption,
  maxRetriesOption,
  numberOption,
  optional,
  optionsObject,
  retryDelayOption,
  signalOption,
  timeoutOption,
} from '../internal/options.js';
import { toRewardFn, type RewardSpec } from '../rewards/combine-rewards.js';
import { evaluateRewardNow } from '../rewards/reward-function.js';
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
import type { RolloutContext, RolloutFn } from './rollout-function.js';
import { closeRolloutScope, openRolloutScope, type RolloutScope } from './rollout-scope.js';
import { TrajectoryRecorder, takeTrajectory } from './trajectory-recorder.js';

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
   * The current policy version (the model's step); read when each rollout starts and ends and
   * stamped as `initial_policy_version` / `final_policy_version` (unless the rollout set them).
   * Every trajectory also gets its `start_time` (ISO 8601) unless the rollout set one.
   */
  policyVersion?: (() => number | Promise<number>) | undefined;
  /**
   * Aborts the gather: rollouts still running see their signal abort (with the signal's reason),
   * and the gather rejects with `APIUserAbortError` (its `cause` is the reason).
   */
  signal?: AbortSignal | undefined;
  /** Receives the gather's typed events. */
  events?: GatherEmitter<S> | undefined;
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
  }

  /** Aborts the attempt's signal with `reason` and rejects the attempt with it, whatever the rollout does with the signal. */
  abort(reason: unknown): void {
    this.controller.abort(reason);
    this.reject(reason);
  }
}

function ignore(): void {}

/** An attempt's timer ran out: it aborts with a {@link RolloutTimeoutError}. */
function timeOut(attempt: Attempt<unknown>, timeout: number): void {
  attempt.abort(new RolloutTimeoutError(timeout));
}

/** The options with their defaults, checked before anything runs. */
function checkOptions<S>(value: GatherOptions<S> | undefined) {
  const options = optionsObject('options', value);
  optional(options.reward, (reward) => {
    if (typeof reward !== 'object' || reward === null) functionOption('reward', reward);
  });
  optional(options.scoreGroup, (scorer) => functionOption('scoreGroup', scorer));
  optional(options.policyVersion, (read) => functionOption('policyVersion', read));
  optional(options.signal, (signal) => signalOption('signal', signal));
  optional(options.progress, (progress) => booleanOption('progress', progress));
  optional(options.events, (events) => {
    if (typeof (events as { emit?: unknown } | null)?.emit !== 'function') {
      throw invalidOption('events', events, 'a GatherEmitter');
    }
  });
  return {
    options,
    groupSize: integerOption('groupSize', options.groupSize ?? 1, { min: 1 }),
    concurrency: integerOption('concurrency', options.concurrency ?? 8, { min: 1 }),
    timeout: timeoutOption('timeout', options.timeout ?? 300_000, true),
    maxRetries: maxRetriesOption('maxRetries', options.maxRetries ?? 0),
    retryDelay: retryDelayOption('retryDelay', options.retryDelay ?? 1000),
    // A count (>= 1 or 0) or a fraction (between 0 and 1): any finite number >= 0.
    maxExceptions: numberOption('maxExceptions', options.maxExceptions ?? 0, { min: 0 }),
  };
}

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
 * Runs `groupSize` rollouts of every scenario and returns one `TrajectoryGroup` per scenario, in
 * scenario order (trajectories in rollout order). Each rollout runs in its own capture scope, so
 * completions made through a `captureCompletions` client are recorded into its trajectory; then the
 * `reward` scores it. A rollout that throws, times out, returns an invalid trajectory or whose
 * reward throws is retried (when retryable) and then kept in `group.exceptions` while within
 * `maxExceptions`; past it the gather aborts the rest and rejects with `ExceptionBudgetExceededError`.
 * @example
 * const groups = await gatherTrajectoryGroups(scenarios, rollout, {
 *   groupSize: 4,
 *   concurrency: 8,
 *   reward: { correct: exactMatch((scenario) => scenario.answer) },
 *   maxExceptions: 0.1,
 *   policyVersion: () => model.getStep(),
 *   progress: true,
 * });
 */
export async function gatherTrajectoryGroups<S>(
  scenarios: Iterable<S>,
  rollout: RolloutFn<S>,
  gatherOptions?: GatherOptions<S>,
): Promise<TrajectoryGroup[]> {
  const { options, groupSize, concurrency, timeout, maxRetries, retryDelay, maxExceptions } =
    checkOptions(gatherOptions);
  functionOption('rollout', rollout);
  if (scenarios === null || typeof (scenarios as { [Symbol.iterator]?: unknown })?.[Symbol.iterator] !== 'function') {
    throw invalidOption('scenarios', scenarios, 'an iterable (an array of scenarios)');
  }
  const reward = options.reward === undefined ? undefined : toRewardFn(options.reward);
  const { scoreGroup, policyVersion, signal } = options;
  if (signal?.aborted) throw userAbortError(signal, 'The gather');
  const list = Array.from(scenarios);
  const total = list.length * groupSize;
  const events = options.events ?? new GatherEmitter<S>();
  const controller = new AbortController();
  // Every running attempt listens on the gather's signal: without this, Node prints a
  // MaxListenersExceededWarning on stderr past 10 concurrent rollouts.
  setMaxListeners(Number.POSITIVE_INFINITY, controller.signal);
  /** The running attempts: `stop` aborts them (cheaper than a listener each on the gather's signal). */
  const running = new Set<Attempt<S>>();

  let stopped = false;
  let rejectGather: (error: unknown) => void = () => undefined;
  const stoppedEarly = new Promise<never>((_resolve, reject) => {
    rejectGather = reject;
  });
  stoppedEarly.catch(() => undefined);
  /** Stops everything: the rollouts see `reason` on their signal, the gather rejects with `error`. */
  const stop = (error: unknown, reason: unknown = error): void => {
    if (stopped) return;
    stopped = true;
    controller.abort(reason);
    for (const attempt of running) attempt.abort(reason);
    rejectGather(error);
  };
  const onAbort = (): void => stop(userAbortError(signal, 'The gather'), abortReason(signal));
  signal?.addEventListener('abort', onAbort, { once: true });

  const emit = <K extends keyof GatherEventMap<S>>(name: K, payload: Parameters<GatherEventMap<S>[K]>[0]): void => {
    try {
      (events.emit as (event: K, payload: unknown) => boolean)(name, payload);
    } catch (error) {
      // A throwing listener is the caller's bug: stop visibly rather than lose rollouts.
      stop(error);
    }
  };

  const stats = { done: 0, failed: 0, finished: 0, rewardSum: 0 };
  const failures: { exception: TrajectoryException; error: unknown }[] = [];
  const overBudget = (count: number): boolean =>
    maxExceptions > 0 && maxExceptions < 1 ? count / total > maxExceptions : count > maxExceptions;
  /** Whether an event has listeners (an emitter that cannot say is assumed to listen). */
  const heard = (name: keyof GatherEventMap<S>): boolean =>
    typeof events.listenerCount !== 'function' || events.listenerCount(name) > 0;
  const progress = (): void => {
    // Built only when someone listens: it runs after every rollout.
    if (!heard('progress')) return;
    emit('progress', {
      done: stats.done,
      total,
      failed: stats.failed,
      rewardMean: stats.finished === 0 ? Number.NaN : stats.rewardSum / stats.finished,
    });
  };

  /** What an attempt does: run the rollout in its scope, then stamp, validate and score its trajectory. */
  const work = async (attempt: Attempt<S>): Promise<Trajectory> => {
    const { recorder, scenario, signal: attemptSignal } = attempt;
    const startTime = new Date().toISOString();
    // Read twice per rollout: an answer given at once (`() => model.getStep()`) skips the microtask queue.
    const initialRead = policyVersion?.();
    const initialVersion = isPromiseLike(initialRead) ? await initialRead : initialRead;
    const context: RolloutContext = {
      signal: attemptSignal,
      trajectory: recorder,
      index: attempt.index,
      groupIndex: attempt.groupIndex,
      attempt: attempt.attempt,
    };
    // The attempt is the rollout's capture scope; the scope closes once what the rollout returned settled.
    const started = openRolloutScope(attempt, rollout, scenario, context);
    let returned: unknown;
    try {
      returned = isPromiseLike(started) ? await started : started;
    } finally {
      closeRolloutScope();
    }
    recorder.close();
    const finalRead = policyVersion?.();
    const finalVersion = isPromiseLike(finalRead) ? await finalRead : finalRead;
    const trajectory = buildTrajectory(recorder[takeTrajectory](), returned);
    trajectory.start_time ??= startTime;
    if (initialVersion !== undefined) trajectory.initial_policy_version ??= initialVersion;
    if (finalVersion !== undefined) trajectory.final_policy_version ??= finalVersion;
    if (reward !== undefined) {
      const value = evaluateRewardNow(reward, trajectory, scenario);
      trajectory.reward = isPromiseLike(value) ? await value : value;
    }
    return trajectory;
  };

  const runRollout = async (scenario: S, groupIndex: number, index: number): Promise<Outcome> => {
    for (let attempt = 0; ; attempt += 1) {
      if (stopped) return undefined;
      if (heard('rollout:start')) emit('rollout:start', { groupIndex, index, attempt });
      const current = new Attempt(scenario, groupIndex, index, attempt);
      running.add(current);
      if (Number.isFinite(timeout)) current.timer = setTimeout(timeOut, timeout, current, timeout);
      try {
        // One promise settled by whichever comes first: the work, or an abort (the gather stopped,
        // or the attempt timed out). Both sources are ours, so they reject directly.
        const trajectory = await new Promise<Trajectory>((resolve, reject) => {
          current.reject = reject;
          work(current).then(resolve, reject);
        });
        current.finish(running);
        if (stopped) return undefined;
        stats.done += 1;
        stats.finished += 1;
        stats.rewardSum += trajectory.reward;
        if (heard('rollout:end')) emit('rollout:end', { groupIndex, index, attempt, trajectory });
        progress();
        return trajectory;
      } catch (error) {
        current.finish(running);
        if (stopped) return undefined;
        const exception = toTrajectoryException(error);
        const willRetry = attempt < maxRetries && isRetryableError(error, true);
        emit('rollout:error', { groupIndex, index, attempt, error, exception, willRetry });
        if (willRetry) {
          try {
            await delay(backoffDelay(attempt + 1, retryDelay), controller.signal);
          } catch {
            return undefined;
          }
          continue;
        }
        stats.done += 1;
        stats.failed += 1;
        failures.push({ exception, error });
        progress();
        if (overBudget(failures.length)) {
          stop(
            new ExceptionBudgetExceededError({
              exceptions: failures.map((failure) => failure.exception),
              errors: failures.map((failure) => failure.error),
              maxExceptions,
              total,
            }),
          );
          return undefined;
        }
        return new Failed(exception);
      }
    }
  };

  const runGroup = async (scenario: S, groupIndex: number, outcomes: readonly Outcome[]): Promise<TrajectoryGroup> => {
    const trajectories: Trajectory[] = [];
    const exceptions: TrajectoryException[] = [];
    for (const outcome of outcomes) {
      if (outcome === undefined) continue;
      if (outcome instanceof Failed) exceptions.push(outcome.exception);
      else trajectories.push(outcome);
    }
    let group: TrajectoryGroup = { trajectories, exceptions };
    if (scoreGroup !== undefined && trajectories.length > 0 && !stopped) {
      const scoring = new AbortController();
      const onStop = (): void => scoring.abort(controller.signal.reason);
      controller.signal.addEventListener('abort', onStop, { once: true });
      const timer = Number.isFinite(timeout)
        ? setTimeout(
            () => scoring.abort(new RolloutTimeoutError(timeout, `scoreGroup of group ${groupIndex}`)),
            timeout,
          )
        : undefined;
      try {
        const scored = await raceSignal(
          Promise.resolve(scoreGroup(group, { scenario, groupIndex, signal: scoring.signal })),
          scoring.signal,
        );
        if (scored) group = scored;
      } finally {
        clearTimeout(timer);
        controller.signal.removeEventListener('abort', onStop);
      }
    }
    if (!stopped) emit('group:end', { groupIndex, scenario, group });
    return group;
  };

  const detachBar =
    options.progress === true && process.stderr.isTTY ? attachProgressBar(events, process.stderr) : undefined;
  try {
    // `concurrency` workers take the rollouts in order (group by group), each from the gather's own
    // async context; a group is scored and reported once its last rollout settled.
    const outcomes: Outcome[][] = list.map(() => new Array<Outcome>(groupSize));
    const remaining: number[] = list.map(() => groupSize);
    const settleGroup: Array<(outcomes: Outcome[]) => void> = [];
    const groupsDone = list.map((scenario, groupIndex) =>
      new Promise<Outcome[]>((resolve) => {
        settleGroup[groupIndex] = resolve;
      }).then((settled) => runGroup(scenario, groupIndex, settled)),
    );
    let next = 0;
    const worker = async (): Promise<void> => {
      while (!stopped && next < total) {
        const position = next;
        next += 1;
        const groupIndex = Math.floor(position / groupSize);
        const index = position % groupSize;
        const outcome = await runRollout(list[groupIndex] as S, groupIndex, index);
        (outcomes[groupIndex] as Outcome[])[index] = outcome;
        remaining[groupIndex] = (remaining[groupIndex] as number) - 1;
        if (remaining[groupIndex] === 0) settleGroup[groupIndex]?.(outcomes[groupIndex] as Outcome[]);
      }
    };
    for (let count = 0; count < Math.min(concurrency, total); count += 1)
      worker().catch((error: unknown) => stop(error));
    const all = Promise.all(groupsDone);
    all.catch(() => undefined);
    const groups = await Promise.race([all, stoppedEarly]);
    if (stopped) await stoppedEarly;
    return groups;
  } catch (error) {
    stop(error);
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    detachBar?.();
  }
}

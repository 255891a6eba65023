/**
 * Which rollout the current async call chain belongs to. Concurrent rollouts that share one
 * captured client each record into their own trajectory because the scope travels with the
 * async context (AsyncLocalStorage), not with the client.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Trajectory } from '../schema/index.js';
import { isPromiseLike } from '../internal/delay.js';
import { PolicyloopError } from '../internal/errors.js';
import { TrajectoryRecorder, type ConversationRecorder } from './trajectory-recorder.js';

/** What a captured client needs to know about the rollout it is called from. */
export interface RolloutScope {
  /** Where the completions go. */
  readonly recorder: TrajectoryRecorder;
  /** Aborts when the rollout is cancelled or times out; passed to requests that carry none. */
  readonly signal?: AbortSignal | undefined;
  /** Where completions go when set (see {@link captureInto}); else the recorder decides. */
  readonly history?: ConversationRecorder | undefined;
}

const storage = new AsyncLocalStorage<RolloutScope>();

/** The scope of the rollout this code runs in, or undefined outside any rollout. */
export function currentRolloutScope(): RolloutScope | undefined {
  return storage.getStore();
}

/**
 * The recorder of the rollout this code runs in, or undefined outside any rollout. Lets deep agent
 * code add metrics or logs without passing the context around.
 * @example
 * currentTrajectory()?.log('retrieved 3 documents');
 */
export function currentTrajectory(): TrajectoryRecorder | undefined {
  return storage.getStore()?.recorder;
}

/** Rollout scopes whose function has not settled yet. */
let openScopes = 0;

/**
 * Called when a scope's function settled: with no scope left, the storage is disabled, which turns
 * off Node's async-context tracking (a hook on every promise the process creates: tens of µs per
 * HTTP request on Node 20) until the next rollout starts.
 */
function closeScope(): void {
  openScopes -= 1;
  if (openScopes === 0) storage.disable();
}

/**
 * Runs `fn(...args)` with `scope` as the current rollout scope (and everything it awaits). The
 * scope is open until what `fn` returned settles. (Arguments rather than a closure: the runner
 * calls it once per rollout.)
 */
export function runInRolloutScope<A extends unknown[], T>(scope: RolloutScope, fn: (...args: A) => T, ...args: A): T {
  const result = openRolloutScope(scope, fn, ...args);
  if (!isPromiseLike(result)) {
    closeScope();
    return result;
  }
  return Promise.resolve(result).then(closeScopeWith, closeScopeAndThrow) as T;
}

/**
 * Starts `fn(...args)` with `scope` as the current rollout scope and returns what it
 * returned; unless it threw, the caller must call {@link closeRolloutScope} once that settled. The
 * runner's form of {@link runInRolloutScope}: it awaits the result itself, so the scope is closed
 * without a promise of its own per rollout.
 */
export function openRolloutScope<A extends unknown[], T>(scope: RolloutScope, fn: (...args: A) => T, ...args: A): T {
  openScopes += 1;
  try {
    return storage.run(scope, fn, ...args);
  } catch (error) {
    closeScope();
    throw error;
  }
}

/** Closes a scope that {@link openRolloutScope} opened, once what its function returned settled. */
export function closeRolloutScope(): void {
  closeScope();
}

/** Closes a scope whose function fulfilled with `value` (shared, so that no closure is built per rollout). */
function closeScopeWith(value: unknown): unknown {
  closeScope();
  return value;
}

/** Closes a scope whose function rejected with `error`. */
function closeScopeAndThrow(error: unknown): never {
  closeScope();
  throw error;
}

/**
 * Runs `fn` (a sub-agent, say) with the completions it makes through a captured client recorded
 * into `history` instead of wherever they would go: `history` must be the current trajectory or
 * one of its `addHistory()` entries. A request that does not continue `history` starts a new
 * `additional_histories` entry. Without it, the first conversation of a rollout becomes the main
 * one, which is wrong when a sub-agent speaks first.
 * @example
 * const rollout: RolloutFn<Task> = async (task, { trajectory }) => {
 *   const plan = await captureInto(trajectory.addHistory(), () => planner(task));
 *   await solver(task, plan); // recorded in the main conversation
 * };
 */
export function captureInto<T>(history: ConversationRecorder, fn: () => T): T {
  const scope = storage.getStore();
  if (scope === undefined) {
    throw new PolicyloopError(
      'captureInto was called outside a rollout; call it inside gatherTrajectoryGroups or recordTrajectory',
    );
  }
  if (history !== scope.recorder && !scope.recorder.additionalHistories.includes(history)) {
    throw new PolicyloopError(
      'Expected captureInto to get the current trajectory or one of its addHistory() entries, got another history',
    );
  }
  return storage.run({ recorder: scope.recorder, signal: scope.signal, history }, fn);
}

/** Options of {@link recordTrajectory}. */
export interface RecordTrajectoryOptions {
  /** Passed to captured requests that carry no signal of their own. */
  signal?: AbortSignal | undefined;
}

/**
 * Runs `fn` in a fresh rollout scope and returns what it returned with the trajectory recorded
 * meanwhile: the way to capture one rollout outside `gatherTrajectoryGroups`. The trajectory is
 * parsed (defaults applied), so a reward function takes it as it is.
 * @example
 * const { trajectory } = await recordTrajectory(async () => {
 *   await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
 * });
 * const reward = await exactMatch('4')(trajectory, undefined);
 */
export async function recordTrajectory<T>(
  fn: (recorder: TrajectoryRecorder) => T | Promise<T>,
  options: RecordTrajectoryOptions = {},
): Promise<{ result: T; trajectory: Trajectory }> {
  const recorder = new TrajectoryRecorder();
  try {
    const result = await runInRolloutScope({ recorder, signal: options.signal }, () => fn(recorder));
    return { result, trajectory: Trajectory.parse(recorder.toTrajectory()) };
  } finally {
    recorder.close();
  }
}

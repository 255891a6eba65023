/** The typed events of `gatherTrajectoryGroups`: one payload object each, noun-verb names. */
import { EventEmitter } from 'eventemitter3';
import type { Trajectory, TrajectoryException, TrajectoryGroup } from '../schema/index.js';

/** Payload of `rollout:start`. */
export interface RolloutStartEvent {
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** Which rollout of its group (0 .. groupSize - 1). */
  readonly index: number;
  /** Which attempt (0 for the first; retries count up). */
  readonly attempt: number;
}

/** Payload of `rollout:end`: a rollout finished and was scored. */
export interface RolloutEndEvent {
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** Which rollout of its group (0 .. groupSize - 1). */
  readonly index: number;
  /** Which attempt (0 for the first; retries count up). */
  readonly attempt: number;
  /** The finished trajectory, with its reward (before any `scoreGroup`). */
  readonly trajectory: Trajectory;
}

/** Payload of `rollout:error`: an attempt failed; `willRetry` says whether another attempt follows. */
export interface RolloutErrorEvent {
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** Which rollout of its group (0 .. groupSize - 1). */
  readonly index: number;
  /** Which attempt (0 for the first; retries count up). */
  readonly attempt: number;
  /** What the attempt threw (a `RolloutTimeoutError`, `RewardFunctionError`, ... or the rollout's own error). */
  readonly error: unknown;
  /** The error as `{type, message, traceback}`, as kept in `group.exceptions`. */
  readonly exception: TrajectoryException;
  /** Whether another attempt follows. */
  readonly willRetry: boolean;
}

/** Payload of `group:end`: every rollout of a group is settled (and the group scored). */
export interface GroupEndEvent<S = unknown> {
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** The group's scenario. */
  readonly scenario: S;
  /** The group as the gather returns it (trajectories and exceptions). */
  readonly group: TrajectoryGroup;
}

/** Payload of `progress`, sent after each rollout settles for good. */
export interface GatherProgressEvent {
  /** Rollouts settled (finished or failed for good). */
  readonly done: number;
  /** Rollouts to run in all. */
  readonly total: number;
  /** Rollouts that failed for good. */
  readonly failed: number;
  /** Mean reward of the finished rollouts so far (NaN before the first). */
  readonly rewardMean: number;
}

/**
 * Something a user should know that fails nothing, said once per gather (library code writes
 * nothing to the console: listen to print it). `unparsed_tool_call`: a reply held tool-call markup
 * the engine could not parse (another model family's format, or a malformed call), so it stayed
 * text; each trajectory counts such replies in its `tool_calls/unparsed` metric.
 */
export interface RolloutWarningEvent {
  readonly code: 'unparsed_tool_call';
  readonly message: string;
  readonly groupIndex: number;
  readonly index: number;
  /** The first trajectory it was seen in. */
  readonly trajectory: Trajectory;
}

/** Event names and payloads of a gather. */
export interface GatherEventMap<S = unknown> {
  /** An attempt of a rollout starts. */
  'rollout:start': (event: RolloutStartEvent) => void;
  /** A rollout finished and was scored. */
  'rollout:end': (event: RolloutEndEvent) => void;
  /** Once per gather: see {@link RolloutWarningEvent}. */
  'rollout:warning': (event: RolloutWarningEvent) => void;
  /** An attempt failed (retried or kept as an exception). */
  'rollout:error': (event: RolloutErrorEvent) => void;
  /** Every rollout of a group settled and the group was scored. */
  'group:end': (event: GroupEndEvent<S>) => void;
  /** A rollout settled for good: counts and the running reward mean. */
  progress: (event: GatherProgressEvent) => void;
}

/**
 * A typed emitter to pass as `events` to `gatherTrajectoryGroups`.
 * @example
 * const events = new GatherEmitter();
 * events.on('progress', ({ done, total, rewardMean }) => logger.info({ done, total, rewardMean }));
 * await gatherTrajectoryGroups(scenarios, rollout, { events });
 */
export class GatherEmitter<S = unknown> extends EventEmitter<GatherEventMap<S>> {}

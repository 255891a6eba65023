/** The typed events of `gatherTrajectoryGroups`: one payload object each, noun-verb names. */
import { EventEmitter } from 'eventemitter3';
import type { Trajectory, TrajectoryException, TrajectoryGroup } from '../schema/index.js';

/** Payload of `rollout:start`. */
export interface RolloutStartEvent {
  readonly groupIndex: number;
  readonly index: number;
  readonly attempt: number;
}

/** Payload of `rollout:end`: a rollout finished and was scored. */
export interface RolloutEndEvent {
  readonly groupIndex: number;
  readonly index: number;
  readonly attempt: number;
  readonly trajectory: Trajectory;
}

/** Payload of `rollout:error`: an attempt failed; `willRetry` says whether another attempt follows. */
export interface RolloutErrorEvent {
  readonly groupIndex: number;
  readonly index: number;
  readonly attempt: number;
  readonly error: unknown;
  readonly exception: TrajectoryException;
  readonly willRetry: boolean;
}

/** Payload of `group:end`: every rollout of a group is settled (and the group scored). */
export interface GroupEndEvent<S = unknown> {
  readonly groupIndex: number;
  readonly scenario: S;
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

/** Event names and payloads of a gather. */
export interface GatherEventMap<S = unknown> {
  'rollout:start': (event: RolloutStartEvent) => void;
  'rollout:end': (event: RolloutEndEvent) => void;
  'rollout:error': (event: RolloutErrorEvent) => void;
  'group:end': (event: GroupEndEvent<S>) => void;
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

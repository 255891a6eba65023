/**
 * Rollouts: capture chat completions into trajectories, and gather N scenarios x G rollouts into
 * trajectory groups with bounded concurrency, retries, an exception budget, events and policy
 * versions.
 * @module
 */
export { captureCompletions, type CaptureCompletionsOptions } from './capture-completions.js';
export { captureFetch, type CaptureFetchOptions } from './capture-fetch.js';
export { HistoryRecorder, TrajectoryRecorder, type RecordedCompletion } from './trajectory-recorder.js';
export {
  captureInto,
  currentTrajectory,
  recordTrajectory,
  type RecordTrajectoryOptions,
} from './rollout-scope.js';
export { StreamAccumulator } from './stream-accumulator.js';
export type { Rollout, RolloutContext, RolloutFn, ScenarioOf } from './rollout-function.js';
export {
  gatherTrajectoryGroups,
  type GatherOptions,
  type GroupScorer,
  type GroupScorerContext,
} from './gather-trajectory-groups.js';
export {
  GatherEmitter,
  type GatherEventMap,
  type GroupEndEvent,
  type GatherProgressEvent,
  type RolloutEndEvent,
  type RolloutErrorEvent,
  type RolloutStartEvent,
} from './gather-events.js';
export { attachProgressBar, formatProgress, type ProgressStream } from './progress-bar.js';
export {
  ExceptionBudgetExceededError,
  InvalidTrajectoryError,
  RolloutTimeoutError,
  toTrajectoryException,
} from './rollout-errors.js';
export { dropStaleGroups, oldestPolicyVersion, type StalenessSplit } from './drop-stale-groups.js';

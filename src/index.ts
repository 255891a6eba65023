/**
 * policyloop: train LLM agents with reinforcement learning from TypeScript.
 *
 * The root entry holds what a user script needs, and nothing heavy: the model and its backends;
 * gathering, capturing and recording rollouts; rewards and the helpers that read a trajectory; the
 * `Trajectory` and `TrajectoryGroup` schemas; and every error a script may catch. The other entries:
 * - `policyloop/schema`: every wire schema of the training API (zod schemas and their types);
 * - `policyloop/client`: the raw HTTP client of the training API, `TrainingClient`;
 * - `policyloop/server`: the local training service (loads Hono, SQLite and the engine);
 * - `policyloop/testing`: helpers to test rewards, rollouts and judges.
 * @module
 */

// The model and its backends.
export {
  TrainableModel,
  type TrainableModelOptions,
  type WaitOptions,
  type OpenAIClientOptions,
  type ModelFetchOptions,
  type LogOptions,
  type JobOptions,
  type TrainOptions,
  type SFTOptions,
  type SFTSource,
  type TrainResult,
  type PruneResult,
} from './training/trainable-model.js';
export type {
  TrainableModelEvents,
  TrainingJobKind,
  JobSubmittedEvent,
  JobEndEvent,
  GroupsDroppedEvent,
  HistoryRowEvent,
  HistoryErrorEvent,
  HistoryMismatchEvent,
} from './training/model-events.js';
export {
  RLTrainer,
  type RLTrainerOptions,
  type RLValidationOptions,
  type RLKeepOptions,
  type RLBudget,
  type RLRunOptions,
  type RLStopReason,
  type RLTrainerSummary,
  type RLTrainerEvents,
  type StepStartEvent,
  type StepEndEvent,
  type RLGroupsDroppedEvent,
  type RLRolloutFailedEvent,
  type ValidationEndEvent,
} from './training/rl-trainer.js';
export {
  constantLearningRate,
  cosineDecay,
  linearDecay,
  withWarmup,
  type DecayOptions,
  type LearningRateSchedule,
  type ScheduleContext,
} from './training/schedules.js';
export { PromptedModel, type PromptedModelOptions } from './training/prompted-model.js';
export type { Backend, BackendConnection } from './training/backend.js';
export { LocalBackend, type LocalBackendOptions } from './training/local-backend.js';
export { HostedBackend, type HostedBackendOptions } from './training/hosted-backend.js';
export type { ModelFiles } from './training/model-files.js';
export type { HistoryRow, HistoryDifference } from './training/history.js';
export type { RetentionOptions } from './training/checkpoint-retention.js';
export { toSFTRows } from './training/sft-data.js';
export { followTrainingJob, type FollowJobOptions, type FollowedJob, type JobProgress } from './training/follow-job.js';
export {
  LogBatcher,
  type LogBatcherOptions,
  type LogBatcherEvents,
  type LogBatcherStats,
  type BatchSentEvent,
  type BatchRetryEvent,
  type BatchSpooledEvent,
  type SpoolReplayResult,
} from './training/log-batcher.js';

// Gathering, capturing and recording rollouts.
export {
  gatherTrajectoryGroups,
  type GatherOptions,
  type GroupScorer,
  type GroupScorerContext,
} from './rollout/gather-trajectory-groups.js';
export type { RolloutContext, RolloutFn, ScenarioOf } from './rollout/rollout-function.js';
export {
  GatherEmitter,
  type GatherEventMap,
  type GroupEndEvent,
  type GatherProgressEvent,
  type RolloutEndEvent,
  type RolloutErrorEvent,
  type RolloutStartEvent,
} from './rollout/gather-events.js';
export { attachProgressBar, type ProgressStream } from './rollout/progress-bar.js';
export { captureCompletions, type CaptureCompletionsOptions } from './rollout/capture-completions.js';
export { captureFetch, type CaptureFetchOptions } from './rollout/capture-fetch.js';
export type {
  ChatCompletionCreateBody,
  ChatCompletionRequestOptions,
  ChatCompletionsClient,
} from './schema/chat-client.js';
export {
  captureInto,
  currentTrajectory,
  recordTrajectory,
  type RecordTrajectoryOptions,
} from './rollout/rollout-scope.js';
export { HistoryRecorder, TrajectoryRecorder, type RecordedCompletion } from './rollout/trajectory-recorder.js';
export { dropStaleGroups, type StalenessSplit } from './rollout/drop-stale-groups.js';

// Rewards, and reading a trajectory.
export { evaluateReward, type RewardFn, type WeightedReward } from './rewards/reward-function.js';
export { combineRewards, type RewardSet, type RewardSpec } from './rewards/combine-rewards.js';
export {
  exactMatch,
  normalizeAnswer,
  normalizedMatch,
  regexMatch,
  type ExpectedValue,
  type NormalizeOptions,
} from './rewards/match-rewards.js';
export { extractJson, validJson, type SafeParser } from './rewards/json-reward.js';
export { containsValue, toolCalledWith, type ExpectedArguments } from './rewards/tool-call-reward.js';
export { lengthPenalty, type LengthPenaltyOptions } from './rewards/length-penalty.js';
export {
  DEFAULT_JUDGE_RUBRIC,
  relativeJudge,
  type GroupJudge,
  type JudgeCallOptions,
  type JudgeScore,
  type RelativeJudgeOptions,
} from './rewards/relative-judge.js';
export {
  assistantTexts,
  choicesOf,
  completionTokenCount,
  finalAssistantText,
  toolCallsOf,
  type AssistantTextsOptions,
  type HasMessagesAndChoices,
  type ModelToolCall,
} from './rewards/trajectory-text.js';

// The training data: trajectories and groups (every other wire schema is in `policyloop/schema`).
export {
  Trajectory,
  TrajectoryGroup,
  isChoice,
  runItems,
  type RunItem,
  type RunReadOptions,
  type TrajectoryInput,
  type TrajectoryGroupInput,
  type Choice,
  type SFTRow,
} from './schema/index.js';

// Every error a script may catch.
export {
  PolicyloopError,
  APIError,
  BadRequestError,
  AuthenticationError,
  PermissionDeniedError,
  NotFoundError,
  ConflictError,
  UnprocessableEntityError,
  RateLimitError,
  InternalServerError,
  APIConnectionError,
  APIConnectionTimeoutError,
  APIUserAbortError,
  InvalidArgumentError,
  ResponseValidationError,
  MissingApiKeyError,
} from './client/index.js';
export {
  ExceptionBudgetExceededError,
  InvalidTrajectoryError,
  RolloutTimeoutError,
} from './rollout/rollout-errors.js';
export { JudgeError, RewardFunctionError, type JudgeFailure } from './rewards/reward-errors.js';
export {
  TrainingJobFailedError,
  MissingLogprobsError,
  TrainingTimeoutError,
  LogDeliveryError,
  LogFlushTimeoutError,
  NoLearningSignalError,
  TrainingJobUncertainError,
  type ChoiceLocation,
} from './training/errors.js';

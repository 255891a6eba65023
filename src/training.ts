/**
 * `policyloop/training`: the training domain for scripts that go past the root entry. It holds the
 * building blocks the models and the trainer are made of (the log batcher, the job follower, the
 * trajectory recorders, the gather emitter, the staleness split, SFT rows from trajectories,
 * evaluating one reward) and every type a script usually gets by inference: the options of each
 * class and function, their results, and the payloads of their events. What a training script
 * constructs and calls is in the root entry `policyloop`, and is not repeated here.
 * @module
 */

// The models, backends and trainer: their options, results and events.
export type { TrainableModelOptions } from './training/trainable-model.js';
export type { OpenAIClientOptions, ModelFetchOptions, LogParams } from './training/prompted-model.js';
export type {
  WaitOptions,
  JobOptions,
  TrainParams,
  TrainParamsProblem,
  LossFn,
  SFTParams,
  SFTSource,
  TrainResult,
  PruneParams,
  PruneResult,
} from './training/backend.js';
export type { ObjectiveParams } from './training/objective-params.js';
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
export type {
  RLTrainerOptions,
  RLValidationOptions,
  RLKeepOptions,
  RLBudget,
  RLRunOptions,
  RLStopReason,
  RLTrainerSummary,
  RLTrainerEvents,
  StepStartEvent,
  StepEndEvent,
  RLRolloutFailedEvent,
  ValidationEndEvent,
} from './training/rl-trainer.js';
export type { DecayOptions, ScheduleContext, WarmupOptions } from './training/schedules.js';
export type { PromptedModelOptions } from './training/prompted-model.js';
export type { BackendConnection } from './training/backend.js';
export type { LocalBackendOptions } from './backends/local-backend.js';
export type { HostedBackendOptions } from './backends/hosted-backend.js';
export type { TinkerBackendOptions, TinkerLoraOptions } from './backends/tinker-backend.js';
export type { ModelFiles } from './training/model-files.js';
export type { HistoryRow, HistoryDifference } from './training/history.js';
export type { RetentionOptions } from './training/checkpoint-retention.js';
export type { ChoiceLocation } from './training/errors.js';

// Environments and their tools: the spec, a run, and the tool contract (sources, toolbox, results).
export type { EnvironmentRun, EnvironmentStartOptions } from './environments/environment.js';
export type { LoadEnvironmentOptions } from './environments/load-environment.js';
export type { EnvironmentLoadErrorOptions } from './environments/environment-errors.js';
export type { TrainerEnvironment, TrainerEnvironmentRun } from './training/rl-trainer.js';
export type {
  DatasetSource,
  EnvironmentRolloutFn,
  EnvironmentSpec,
  EnvironmentTool,
  RolloutOutcome,
} from './environments/environment-types.js';
export type { FunctionTool, FunctionToolContext, FunctionToolOptions, JsonSchema } from './tools/function-tool.js';
export type {
  RolloutTools,
  StartedToolSource,
  Toolbox,
  ToolCallOptions,
  ToolDefinition,
  ToolResult,
  ToolRolloutInfo,
  ToolSource,
  ToolSourceStartOptions,
} from './tools/tool-types.js';

// Building blocks: SFT rows, following a job, the log batcher.
export { toSFTRows } from './training/sft-data.js';
export { followTrainingJob, type FollowJobOptions, type FollowedJob, type JobProgress } from './training/follow-job.js';
export {
  LogBatcher,
  type LogBatcherOptions,
  type LogBatcherAddParams,
  type LogBatcherAddOptions,
  type FlushOptions,
  type LogBatcherEvents,
  type LogBatcherStats,
  type BatchSentEvent,
  type BatchRetryEvent,
  type BatchSpooledEvent,
  type SpoolReplayResult,
} from './training/log-batcher.js';

// Rollouts: gather options and events, capture options, recorders, staleness.
export type { GatherOptions, GroupScorer, GroupScorerContext } from './rollout/gather-trajectory-groups.js';
export type { ScenarioOf } from './rollout/rollout-function.js';
export type { RolloutEndpoint, EndpointModel } from './rollout/endpoint/rollout-endpoint.js';
export type {
  AgentProcessOptions,
  AgentProcessOutput,
  AgentProcessResult,
} from './rollout/endpoint/agent-process.js';
export {
  GatherEmitter,
  type GatherEventMap,
  type GroupEndEvent,
  type GatherProgressEvent,
  type RolloutEndEvent,
  type RolloutWarningEvent,
  type RolloutErrorEvent,
  type RolloutStartEvent,
} from './rollout/gather-events.js';
export type { ProgressStream } from './rollout/progress-bar.js';
export type { CaptureCompletionsOptions } from './rollout/capture-completions.js';
export type { CaptureFetchOptions } from './rollout/capture-fetch.js';
export type { ChatCompletionCreateBody, ChatCompletionRequestOptions } from './schema/chat-client.js';
export type { RecordTrajectoryOptions } from './rollout/rollout-scope.js';
export {
  ConversationRecorder,
  TrajectoryRecorder,
  type RecordedCompletion,
} from './rollout/trajectory-recorder.js';
export { dropStaleGroups, groupSampledStep, type StalenessSplit } from './rollout/drop-stale-groups.js';

// Rewards: evaluating one, and the option and result types of the built-ins and the judge.
export { evaluateReward, type WeightedReward } from './rewards/reward-function.js';
export type { RewardSet, RewardSpec } from './rewards/combine-rewards.js';
export type { ExpectedValue, NormalizeOptions } from './rewards/match-rewards.js';
export type { SafeParser } from './rewards/json-reward.js';
export type { ExpectedArguments } from './rewards/tool-call-reward.js';
export type { LengthPenaltyOptions } from './rewards/length-penalty.js';
export type { GroupJudge, JudgeCallOptions, JudgeScore, RelativeJudgeOptions } from './rewards/relative-judge.js';
export type { AssistantTextsOptions, HasMessagesAndChoices, ModelToolCall } from './rewards/trajectory-text.js';
export type { JudgeFailure } from './rewards/reward-errors.js';
export type { RunItem, RunReadOptions } from './schema/index.js';

// MCP servers: the options and config types of `mcpServer`, and of `generateTasks`.
export type {
  McpCommandConfig,
  McpConfigContext,
  McpServerConfig,
  McpServerConfigSource,
  McpServerOptions,
  McpToolSource,
  McpUrlConfig,
} from './tools/mcp/mcp-server.js';
export type { McpServerFailure } from './tools/mcp/mcp-errors.js';
// A rollout's tools at a loopback MCP URL, for agent frameworks with their own MCP client.
export { serveMcp, type McpEndpoint, type ServeMcpOptions } from './tools/mcp/serve-mcp.js';
export type {
  GeneratedTask,
  GenerateTasksOptions,
  GenerateTasksParams,
  TaskWriterModel,
} from './tools/mcp/generate-tasks.js';

// Evaluation: its options, result, rows, files and pass@k.
export type {
  EvaluateOptions,
  EvaluationProgress,
  EvaluationResult,
} from './environments/evaluate.js';
export type { RescoreOptions, RescoreResult } from './environments/rescore.js';
export type { EvaluationMetadata, EvaluationNumbers, EvaluationRow } from './environments/eval-files.js';
export { passAllK, passAtK, passKValues } from './environments/pass-at-k.js';

/**
 * Training: the model handle (register, step, OpenAI client, log, RL and SFT training, checkpoint
 * retention), the local and hosted backends, metric history, and the log batcher.
 * @module
 */
export {
  RLTrainer,
  formatStepLine,
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
  type ValidationEndEvent,
  type RLRolloutFailedEvent,
} from './rl-trainer.js';
export {
  constantLearningRate,
  cosineDecay,
  learningRateAt,
  linearDecay,
  withWarmup,
  type DecayOptions,
  type LearningRateSchedule,
  type ScheduleContext,
} from './schedules.js';
export {
  PromptedModel,
  type PromptedModelOptions,
  type PromptedLogOptions,
  type InferenceEndpoint,
  type ModelFetchOptions,
} from './prompted-model.js';
export type {
  Backend,
  BackendConnection,
  TrainingJobs,
  JobModel,
  JobReporter,
  RLJobRequest,
} from './backend.js';
export { ServiceJobs, type JobsBackend } from './service-jobs.js';
export { dropGroups, type DropRule, type DropContext, type GroupDrop } from './drop-groups.js';
export { LocalBackend, type LocalBackendOptions } from './local-backend.js';
export { HostedBackend, HOSTED_BASE_URL, type HostedBackendOptions } from './hosted-backend.js';
export {
  TrainableModel,
  type TrainableModelOptions,
  type WaitOptions,
  type OpenAIClientOptions,
  type LogOptions,
  type LogParams,
  type JobOptions,
  type TrainOptions,
  type SFTOptions,
  type SFTSource,
  type TrainResult,
  type PruneParams,
  type PruneResult,
} from './trainable-model.js';
export type {
  TrainableModelEvents,
  TrainingJobKind,
  JobSubmittedEvent,
  JobEndEvent,
  GroupsDroppedEvent,
  StaleGroupsDroppedEvent,
  ZeroVarianceGroupsDroppedEvent,
  HistoryRowEvent,
  HistoryErrorEvent,
  HistoryMismatchEvent,
} from './model-events.js';
export { modelInferenceName } from './inference-name.js';
export { DEFAULT_DATA_DIR, modelFiles, type ModelFiles } from './model-files.js';
export {
  appendHistoryRow,
  readHistory,
  metricByStep,
  compareHistories,
  historyRowsFromService,
  toStepMetricsBodies,
  type HistoryRow,
  type HistoryDifference,
  type ServiceStepMetrics,
  type StepMetricsBody,
} from './history.js';
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
} from './log-batcher.js';
export type { SpoolRecord } from './spool.js';
export {
  followTrainingJob,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_JOB_TIMEOUT_MS,
  type FollowJobOptions,
  type FollowedJob,
  type JobProgress,
} from './follow-job.js';
export { assertChoicesHaveLogprobs, findChoicesWithoutLogprobs } from './missing-logprobs.js';
export { planRetention, type RetentionOptions, type RetentionPlan } from './checkpoint-retention.js';
export { trajectoryToSFTRow, trajectoryToSFTRows, toSFTRows, writeSFTFile } from './sft-data.js';
export {
  TrainingJobFailedError,
  MissingLogprobsError,
  TrainingTimeoutError,
  LogDeliveryError,
  LogFlushTimeoutError,
  NoLearningSignalError,
  TrainingJobUncertainError,
  type ChoiceLocation,
} from './errors.js';

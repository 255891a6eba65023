/**
 * policyloop: train LLM agents with reinforcement learning from TypeScript.
 *
 * The root entry holds what a training script imports, and nothing heavy: the models, backends and
 * trainer it constructs; the functions it calls to gather, capture and record rollouts, to reward
 * them and to read a trajectory; the types it writes when it defines its own rollout, reward,
 * schedule or backend; the `Trajectory` and `TrajectoryGroup` schemas; and every error a script may
 * catch. It has a budget (docs/architecture.md, "The root entry"). The other entries:
 * - `policyloop/training`: the training domain's building blocks (log batcher, job follower,
 *   recorders, staleness split) and every type a script gets by inference: options, results,
 *   event payloads;
 * - `policyloop/schema`: every wire schema of the training API (zod schemas and their types);
 * - `policyloop/client`: the raw HTTP client of the training API, `TrainingClient`;
 * - `policyloop/server`: the local training service (loads Hono, SQLite and the engine);
 * - `policyloop/testing`: helpers to test rewards, rollouts and judges.
 * @module
 */

// The models, backends and trainer a script constructs.
export { TrainableModel } from './training/trainable-model.js';
export { PromptedModel } from './training/prompted-model.js';
export type { Backend } from './training/backend.js';
export { LocalBackend } from './backends/local-backend.js';
export { HostedBackend } from './backends/hosted-backend.js';
export { TinkerBackend } from './backends/tinker-backend.js';
export { TinkerFutureTimeoutError, TinkerRequestFailedError } from './backends/tinker/errors.js';
export { RLTrainer } from './training/rl-trainer.js';
export {
  constantLearningRate,
  cosineDecay,
  linearDecay,
  withWarmup,
  type LearningRateSchedule,
} from './training/schedules.js';

// Gathering, capturing and recording rollouts.
export { gatherTrajectoryGroups } from './rollout/gather-trajectory-groups.js';
export type { RolloutContext, RolloutFn } from './rollout/rollout-function.js';
export { attachProgressBar } from './rollout/progress-bar.js';
export { captureCompletions } from './rollout/capture-completions.js';
export { captureFetch } from './rollout/capture-fetch.js';
export type { ChatCompletionsClient } from './schema/chat-client.js';
export { captureInto, currentTrajectory, recordTrajectory } from './rollout/rollout-scope.js';

// Environments: a task set with its interaction and rubric, defined, loaded by name, trained on.
export { defineEnvironment } from './environments/define-environment.js';
export { loadEnvironment } from './environments/load-environment.js';
export { EnvironmentLoadError } from './environments/environment-errors.js';
export type { Environment } from './environments/environment.js';
export type { EnvironmentContext, PromptTask } from './environments/environment-types.js';
export { functionTool } from './tools/function-tool.js';
// Measuring a model on one, and scoring a saved evaluation again.
export { evaluate } from './environments/evaluate.js';
export { rescore } from './environments/rescore.js';

// Rewards, and reading a trajectory.
export type { RewardFn } from './rewards/reward-function.js';
export { combineRewards } from './rewards/combine-rewards.js';
export { exactMatch, normalizeAnswer, normalizedMatch, regexMatch } from './rewards/match-rewards.js';
export { extractJson, validJson } from './rewards/json-reward.js';
export { containsValue, toolCalledWith } from './rewards/tool-call-reward.js';
export { lengthPenalty } from './rewards/length-penalty.js';
export { DEFAULT_JUDGE_RUBRIC, relativeJudge } from './rewards/relative-judge.js';
export {
  assistantTexts,
  choicesOf,
  completionTokenCount,
  finalAssistantText,
  toolCallsOf,
} from './rewards/trajectory-text.js';

// The training data: trajectories, groups and SFT rows (every other wire schema is in `policyloop/schema`).
export {
  Trajectory,
  TrajectoryGroup,
  isChoice,
  runItems,
  type TrajectoryInput,
  type TrajectoryGroupInput,
  type SFTRow,
} from './schema/index.js';

// MCP servers as tool sources of an environment, and training tasks written from tools.
export { mcpServer } from './tools/mcp/mcp-server.js';
export { generateTasks } from './tools/mcp/generate-tasks.js';

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
  AgentProcessError,
} from './rollout/rollout-errors.js';
export { JudgeError, RewardFunctionError } from './rewards/reward-errors.js';
export {
  TrainingJobFailedError,
  MissingLogprobsError,
  TrainingTimeoutError,
  LogDeliveryError,
  LogFlushTimeoutError,
  NoLearningSignalError,
  TrainingJobUncertainError,
} from './training/errors.js';
export { McpServerError } from './tools/mcp/mcp-errors.js';
export { TaskGenerationError } from './tools/mcp/generate-tasks.js';

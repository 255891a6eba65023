/**
 * `policyloop/client`: the typed HTTP client of the training API (and the inference API's model
 * list): auth, retries, timeouts, abort signals, cursor pages and one error tree. Most scripts use
 * `TrainableModel` from `policyloop` instead, which holds one of these.
 * @module
 */
export {
  TrainingClient,
  DEFAULT_BASE_URL,
  DEFAULT_INFERENCE_BASE_URL,
  DEFAULT_MAX_RETRIES,
  DEFAULT_TIMEOUT_MS,
} from './training-client.js';
export type {
  ClientOptions,
  RequestOptions,
  CheckpointListParams,
  EventListParams,
  InferenceModelListParams,
} from './options.js';
export { Page, PagePromise } from './pagination.js';
export type { PageBody, PageFetcher } from './pagination.js';
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
} from './errors.js';
export type { ConnectionErrorOptions, ResponseValidationErrorOptions } from './errors.js';
export { BaseModels } from './resources/base-models.js';
export { Models } from './resources/models.js';
export { Checkpoints } from './resources/checkpoints.js';
export { Jobs } from './resources/jobs.js';
export { Inference, InferenceModels } from './resources/inference.js';
export { Local, LocalJobs, LocalMetrics, LocalModels, LocalTrajectoryGroups } from './resources/local.js';
export type {
  LocalJobListParams,
  LocalModelListParams,
  LoggedTrajectoryGroupListParams,
  StepMetricsListParams,
} from './resources/local.js';
export { VERSION } from './version.js';

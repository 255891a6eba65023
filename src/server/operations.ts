/**
 * Every operation the local service answers, as data: method, path, whether it needs a key, the
 * zod schemas of its parameters and body, its answer and the error statuses it can give. The
 * routes are registered from these entries (`RouteTable.add(operation, handler)`) and validate
 * with their schemas, and `openapi.ts` writes the service's OpenAPI document from the same list:
 * a route cannot exist without its entry, nor answer with a schema its entry does not name.
 */
import { z } from 'zod';
import {
  BaseModelList,
  ChatCompletionChunk,
  ChatCompletionResponseBody,
  CheckpointListQuery,
  CheckpointPage,
  CreateStepMetricsRequest,
  DeleteCheckpointsRequest,
  DeleteCheckpointsResponse,
  DeleteModelResponse,
  EventListQuery,
  InferenceModelList,
  LocalModelListQuery,
  LocalModelPage,
  LocalModelResponse,
  LocalTrainingJobPage,
  LoggedTrajectoryGroupListQuery,
  LoggedTrajectoryGroupPage,
  ModelResponse,
  PageQuery,
  StepMetricsListQuery,
  StepMetricsPage,
  StepMetricsResponse,
  SystemCheckResponse,
  TrainingJobDetails,
  TrainingJobEventPage,
  Uuid,
} from '../schema/index.js';
import {
  type ContractContext,
  chatCompletionBody,
  HealthResponse,
  LogBody,
  LogResponse,
  registerModelBody,
  rlJobBody,
  sftJobBody,
} from './contract.js';

/** HTTP methods the service routes. */
export type OperationMethod = 'GET' | 'POST' | 'DELETE';

/** A zod schema, or one built from the running service's {@link ContractContext}. */
export type SchemaSource<Schema extends z.ZodType = z.ZodType> = Schema | ((context: ContractContext) => Schema);

/** A JSON answer: its component name in the document and its schema. */
export interface JsonAnswer {
  /** Name of the schema under `components/schemas`. */
  readonly name: string;
  readonly schema: SchemaSource;
  /**
   * Which side of the zod schema the document shows: `output` (what the service builds; the
   * default) or `input` (what a client parses: for schemas with transforms, such as trajectories).
   */
  readonly io?: 'input' | 'output' | undefined;
}

/** Error statuses an operation may answer besides the ones every operation can (401, 421, 503). */
export type ErrorStatus = 404 | 409 | 413 | 422;

/** One operation of the service. */
export interface Operation {
  /** Unique name (`operationId`). */
  readonly id: string;
  readonly method: OperationMethod;
  /** OpenAPI path template (`{param}` segments). */
  readonly path: string;
  /** Answers without a key (health, the base-model list, the dashboard, this document). @default false */
  readonly public?: boolean | undefined;
  readonly summary: string;
  readonly description?: string | undefined;
  readonly tag: string;
  /** Schemas of the `{param}` segments of `path`. */
  readonly pathParameters?: Readonly<Record<string, z.ZodType>> | undefined;
  /** The query string's schema (an object of string-coerced fields). */
  readonly query?: z.ZodObject | undefined;
  /** The JSON body's schema (required when present). */
  readonly body?: { readonly name: string; readonly schema: SchemaSource } | undefined;
  /** Honours `Idempotency-Key` (the writes that `idempotentWrite` wraps). @default false */
  readonly idempotent?: boolean | undefined;
  /** The 200 answer. */
  readonly ok: {
    readonly description: string;
    readonly json?: JsonAnswer | undefined;
    /** A `text/event-stream` of JSON events of this schema, ended by `data: [DONE]`. */
    readonly events?: JsonAnswer | undefined;
    /** Other media types and their JSON Schemas (an HTML page, a script). */
    readonly other?: Readonly<Record<string, Record<string, unknown>>> | undefined;
  };
  /** Error statuses beyond 401 (unless public), 421 and 503. */
  readonly errors: readonly ErrorStatus[];
  /** A 503 with this body instead of the error body (the system check's report). */
  readonly unavailable?: JsonAnswer | undefined;
  /** OpenAPI links of the 200 answer, by the target's operation id. */
  readonly links?: Links | undefined;
}

/** OpenAPI links: target operation id to its parameters and body (runtime expressions such as `$response.body#/id`). */
export type Links = Readonly<
  Record<string, { readonly parameters?: Readonly<Record<string, string>>; readonly requestBody?: unknown }>
>;

/** The dashboard's files under `/assets/` and their media types. */
export const DASHBOARD_ASSETS: Readonly<Record<string, string>> = {
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
  'uplot.min.js': 'text/javascript; charset=utf-8',
  'uplot.min.css': 'text/css; charset=utf-8',
};

const modelId = { model_id: Uuid };
const jobId = { training_job_id: Uuid };
const byModelId = { parameters: { model_id: '$response.body#/id' } };
const modelLinks: Links = {
  getLocalModel: byModelId,
  listCheckpoints: byModelId,
  deleteCheckpoints: byModelId,
  logTrajectories: byModelId,
  listStepMetrics: byModelId,
  createStepMetrics: byModelId,
  listModelJobs: byModelId,
  listLoggedGroups: byModelId,
  // Merged into the generated body (how schemathesis reads an object of runtime expressions).
  createTrainingJob: { requestBody: { model_id: '$response.body#/id' } },
  createSftTrainingJob: { requestBody: { model_id: '$response.body#/id' } },
  deleteModel: byModelId,
};
const byJobId = { parameters: { training_job_id: '$response.body#/id' } };
const jobLinks: Links = { getTrainingJob: byJobId, listTrainingJobEvents: byJobId };
const jobAnswer: JsonAnswer = { name: 'TrainingJobDetails', schema: TrainingJobDetails };

const chatCompletion = (id: string, path: string): Operation => ({
  id,
  method: 'POST',
  path,
  tag: 'inference',
  summary: path.endsWith('/') ? 'Create a chat completion (trailing-slash spelling)' : 'Create a chat completion',
  description:
    'An OpenAI chat completion sampled from a base model or a trained model (see `model`). Unknown keys are ignored. ' +
    'With `stream: true` the answer is `text/event-stream` (`chat.completion.chunk` events, then `data: [DONE]`). ' +
    'Every choice carries `policy_token_spans`. A prompt longer than the model context, or content the model cannot read ' +
    '(image, audio and file parts for real models), is a 422; a completion that outlives the service time limit is a 503 with `Retry-After`.',
  body: { name: 'ChatCompletionRequestBody', schema: chatCompletionBody },
  ok: {
    description: 'The completion (`chat.completion`), or its stream',
    json: { name: 'ChatCompletionResponseBody', schema: ChatCompletionResponseBody },
    events: { name: 'ChatCompletionChunk', schema: ChatCompletionChunk },
  },
  errors: [404, 413, 422],
});

/** The service's operations, in the order the document lists them. */
export const OPERATIONS: readonly Operation[] = [
  {
    id: 'getHealth',
    method: 'GET',
    path: '/v1/health',
    public: true,
    tag: 'system',
    summary: 'Health',
    description: 'Answers while the service runs, also while it stops.',
    ok: { description: 'The service runs', json: { name: 'HealthResponse', schema: HealthResponse } },
    errors: [],
  },
  {
    id: 'getSystemCheck',
    method: 'GET',
    path: '/v1/system-check',
    public: true,
    tag: 'system',
    summary: 'System check',
    description: 'The store, the job queue and the engine, each checked; a 503 with the same report when one fails.',
    ok: { description: 'Every check passed', json: { name: 'SystemCheckResponse', schema: SystemCheckResponse } },
    unavailable: { name: 'SystemCheckResponse', schema: SystemCheckResponse },
    errors: [],
  },
  {
    id: 'listBaseModels',
    method: 'GET',
    path: '/v1/preview/base-models',
    public: true,
    tag: 'models',
    summary: 'Base models',
    description:
      'The built-in models and the Hugging Face folders the engine can run (from `serve --model DIR` and the Hugging Face cache). A folder the engine cannot run is not listed; registering on it is a 422 saying why.',
    ok: { description: 'Base model ids', json: { name: 'BaseModelList', schema: BaseModelList } },
    errors: [],
  },
  {
    id: 'getOpenApiDocument',
    method: 'GET',
    path: '/openapi.json',
    public: true,
    tag: 'system',
    summary: 'This document',
    description: 'The OpenAPI 3.1 document of this service, generated from the schemas its routes validate with.',
    ok: {
      description: 'The document',
      json: {
        name: 'OpenApiDocument',
        schema: z.looseObject({ openapi: z.string(), info: z.looseObject({}), paths: z.looseObject({}) }),
      },
    },
    errors: [],
  },
  chatCompletion('createChatCompletion', '/v1/chat/completions'),
  chatCompletion('createChatCompletionTrailingSlash', '/v1/chat/completions/'),
  {
    id: 'listInferenceModels',
    method: 'GET',
    path: '/v1/models',
    tag: 'inference',
    summary: 'Inference models',
    description:
      'Every name a chat completion takes: the base models, and each registered model by its latest name, `:step0` and every checkpoint step.',
    ok: { description: 'The OpenAI model list', json: { name: 'InferenceModelList', schema: InferenceModelList } },
    errors: [],
  },
  {
    id: 'registerModel',
    method: 'POST',
    path: '/v1/preview/models',
    tag: 'models',
    summary: 'Register a model',
    description:
      'Get-or-create with `return_existing: true`; without it, an existing `(entity, project, name)` is a 409, as is an existing one on another base model.',
    body: { name: 'ModelCreate', schema: registerModelBody },
    idempotent: true,
    ok: { description: 'The model', json: { name: 'ModelResponse', schema: ModelResponse } },
    errors: [409, 413, 422],
    links: modelLinks,
  },
  {
    id: 'deleteModel',
    method: 'DELETE',
    path: '/v1/preview/models/{model_id}',
    tag: 'models',
    summary: 'Delete a model',
    description: 'Deletes the model, its checkpoints and its logs; its running job is stopped.',
    pathParameters: modelId,
    ok: { description: 'What was deleted', json: { name: 'DeleteModelResponse', schema: DeleteModelResponse } },
    errors: [404, 422],
  },
  {
    id: 'listCheckpoints',
    method: 'GET',
    path: '/v1/preview/models/{model_id}/checkpoints',
    tag: 'models',
    summary: 'List checkpoints',
    description: 'By step (`order`). An `after` that names no checkpoint of the model is a 422.',
    pathParameters: modelId,
    query: CheckpointListQuery,
    ok: { description: 'A page of checkpoints', json: { name: 'CheckpointPage', schema: CheckpointPage } },
    errors: [404, 422],
  },
  {
    id: 'deleteCheckpoints',
    method: 'DELETE',
    path: '/v1/preview/models/{model_id}/checkpoints',
    tag: 'models',
    summary: 'Delete checkpoints',
    pathParameters: modelId,
    body: { name: 'DeleteCheckpointsRequest', schema: DeleteCheckpointsRequest },
    ok: {
      description: 'How many went, which steps were not there',
      json: { name: 'DeleteCheckpointsResponse', schema: DeleteCheckpointsResponse },
    },
    errors: [404, 413, 422],
  },
  {
    id: 'logTrajectories',
    method: 'POST',
    path: '/v1/preview/models/{model_id}/log',
    tag: 'models',
    summary: 'Log trajectory groups',
    description:
      'Stores the groups under the model step and records the step metrics. Every group needs `trajectories` (the primary contract; the newer document makes it optional).',
    pathParameters: modelId,
    body: { name: 'LogRequest', schema: LogBody },
    idempotent: true,
    ok: { description: 'The step and its metrics', json: { name: 'LogResponse', schema: LogResponse } },
    errors: [404, 409, 413, 422],
  },
  {
    id: 'createTrainingJob',
    method: 'POST',
    path: '/v1/preview/training-jobs',
    tag: 'training',
    summary: 'Create an RL training job',
    description:
      'Queues the job; it ends with one terminal event (`training_ended` or `training_failed`). Every group needs `trajectories`.',
    body: { name: 'CreateTrainingJob', schema: rlJobBody },
    idempotent: true,
    ok: { description: 'The queued job', json: jobAnswer },
    errors: [404, 409, 413, 422],
    links: jobLinks,
  },
  {
    id: 'createSftTrainingJob',
    method: 'POST',
    path: '/v1/preview/sft-training-jobs',
    tag: 'training',
    summary: 'Create an SFT training job',
    description: 'Queues the job. `training_data_url` says which URLs this service reads.',
    body: { name: 'CreateSFTTrainingJob', schema: sftJobBody },
    idempotent: true,
    ok: { description: 'The queued job', json: jobAnswer },
    errors: [404, 409, 413, 422],
    links: jobLinks,
  },
  {
    id: 'getTrainingJob',
    method: 'GET',
    path: '/v1/preview/training-jobs/{training_job_id}',
    tag: 'training',
    summary: 'Get a training job',
    pathParameters: jobId,
    ok: { description: 'The job', json: jobAnswer },
    errors: [404, 422],
  },
  {
    id: 'listTrainingJobEvents',
    method: 'GET',
    path: '/v1/preview/training-jobs/{training_job_id}/events',
    tag: 'training',
    summary: 'List a job events',
    description:
      'In order. `wait_ms` (this service only) long-polls: with nothing after `after` yet, the answer waits up to that long for an event. An `after` that names no event of the job is a 422.',
    pathParameters: jobId,
    query: EventListQuery,
    ok: { description: 'A page of events', json: { name: 'TrainingJobEventPage', schema: TrainingJobEventPage } },
    errors: [404, 422],
  },
  {
    id: 'listLocalModels',
    method: 'GET',
    path: '/v1/local/models',
    tag: 'local',
    summary: 'List models (local)',
    description: 'Newest first, filtered by exact `entity`, `project` and `name`. An unknown `after` is a 422.',
    query: LocalModelListQuery,
    ok: { description: 'A page of models', json: { name: 'LocalModelPage', schema: LocalModelPage } },
    errors: [422],
  },
  {
    id: 'getLocalModel',
    method: 'GET',
    path: '/v1/local/models/{model_id}',
    tag: 'local',
    summary: 'Get a model (local)',
    pathParameters: modelId,
    ok: { description: 'The model with its step', json: { name: 'LocalModelResponse', schema: LocalModelResponse } },
    errors: [404, 422],
  },
  {
    id: 'listStepMetrics',
    method: 'GET',
    path: '/v1/local/models/{model_id}/metrics',
    tag: 'local',
    summary: 'List step metrics (local)',
    description: 'By step, then split. An unknown `after` is a 422.',
    pathParameters: modelId,
    query: StepMetricsListQuery,
    ok: { description: 'A page of step metrics', json: { name: 'StepMetricsPage', schema: StepMetricsPage } },
    errors: [404, 422],
  },
  {
    id: 'createStepMetrics',
    method: 'POST',
    path: '/v1/local/models/{model_id}/metrics',
    tag: 'local',
    summary: 'Record step metrics (local)',
    description: 'Metric names carry no split prefix: `loss` under split `train`, not `train/loss` (a 422 says so).',
    pathParameters: modelId,
    body: { name: 'CreateStepMetricsRequest', schema: CreateStepMetricsRequest },
    idempotent: true,
    ok: {
      description: 'The merged metrics of the step and split',
      json: { name: 'StepMetricsResponse', schema: StepMetricsResponse },
    },
    errors: [404, 409, 413, 422],
  },
  {
    id: 'listModelJobs',
    method: 'GET',
    path: '/v1/local/models/{model_id}/jobs',
    tag: 'local',
    summary: 'List a model jobs (local)',
    description: 'Newest first. An unknown `after` is a 422.',
    pathParameters: modelId,
    query: PageQuery,
    ok: { description: 'A page of jobs', json: { name: 'LocalTrainingJobPage', schema: LocalTrainingJobPage } },
    errors: [404, 422],
  },
  {
    id: 'listLoggedGroups',
    method: 'GET',
    path: '/v1/local/models/{model_id}/trajectory-groups',
    tag: 'local',
    summary: 'List logged trajectory groups (local)',
    description: 'In the order they were logged, filtered by `step` and `split`. An unknown `after` is a 422.',
    pathParameters: modelId,
    query: LoggedTrajectoryGroupListQuery,
    ok: {
      description: 'A page of logged groups',
      json: { name: 'LoggedTrajectoryGroupPage', schema: LoggedTrajectoryGroupPage, io: 'input' },
    },
    errors: [404, 422],
  },
  {
    id: 'getDashboard',
    method: 'GET',
    path: '/',
    public: true,
    tag: 'dashboard',
    summary: 'Dashboard page',
    description: 'The dashboard (it asks for the key and sends it with its requests).',
    ok: { description: 'The page', other: { 'text/html': { type: 'string' } } },
    errors: [404],
  },
  {
    id: 'getDashboardAsset',
    method: 'GET',
    path: '/assets/{file}',
    public: true,
    tag: 'dashboard',
    summary: 'Dashboard script or style',
    pathParameters: { file: z.enum(Object.keys(DASHBOARD_ASSETS) as [string, ...string[]]) },
    ok: { description: 'The file', other: { 'text/javascript': { type: 'string' }, 'text/css': { type: 'string' } } },
    errors: [404],
  },
];

/** The operation with this id (a programming error when there is none). */
export function operation(id: string): Operation {
  const found = OPERATIONS.find((candidate) => candidate.id === id);
  if (found === undefined) throw new Error(`Expected an operation named ${JSON.stringify(id)} in OPERATIONS`);
  return found;
}

/** A schema source resolved for the running service. */
export function resolveSchema<Schema extends z.ZodType>(
  source: SchemaSource<Schema>,
  context: ContractContext,
): Schema {
  return typeof source === 'function' ? source(context) : source;
}

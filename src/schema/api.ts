/** Request and response bodies of the training API's model, checkpoint and job operations. */
import { z } from 'zod';
import { page } from './page.js';
import { TrajectoryGroup } from './trajectory.js';

/**
 * A UUID in the 8-4-4-4-12 hex form, any version, either case. (ajv-formats would also take a
 * `urn:uuid:` prefix; no service sends one.)
 */
export const Uuid = z.guid();
export type Uuid = z.infer<typeof Uuid>;

/**
 * Body of `POST /v1/preview/models`: get-or-create when `return_existing` is true. A `null` or
 * missing `entity` means the caller's default entity. `return_existing` defaults to `false`.
 * @example
 * ModelCreate.parse({ project: 'weather', name: 'agent-001', base_model: 'tiny', return_existing: true });
 */
export const ModelCreate = z.object({
  entity: z.string().nullable().optional(),
  project: z.string(),
  name: z.string(),
  base_model: z.string(),
  /** Return the existing model of the same entity, project and name instead of a 409. @default false */
  return_existing: z.boolean().default(false),
});
export type ModelCreate = z.output<typeof ModelCreate>;
/** A model-create body as it may be written before parsing. */
export type ModelCreateInput = z.input<typeof ModelCreate>;

/** A registered trainable model. */
export const ModelResponse = z.object({
  id: Uuid,
  entity: z.string(),
  project: z.string(),
  name: z.string(),
  base_model: z.string(),
  run_id: z.string().nullable().optional(),
});
export type ModelResponse = z.infer<typeof ModelResponse>;

/** Response of `DELETE /v1/preview/models/{model_id}`. */
export const DeleteModelResponse = z.object({
  model_id: Uuid,
  deleted_checkpoints: z.int(),
  deleted_run: z.boolean(),
});
export type DeleteModelResponse = z.infer<typeof DeleteModelResponse>;

/** A checkpoint: one per finished training job; `step` is the policy version. */
export const CheckpointResponse = z.object({
  id: Uuid,
  step: z.int(),
  metrics: z.record(z.string(), z.number()),
});
export type CheckpointResponse = z.infer<typeof CheckpointResponse>;

/** A page of checkpoints. */
export const CheckpointPage = page(CheckpointResponse);
export type CheckpointPage = z.output<typeof CheckpointPage>;

/** Body of `DELETE /v1/preview/models/{model_id}/checkpoints`. */
export const DeleteCheckpointsRequest = z.object({ steps: z.array(z.int()) });
export type DeleteCheckpointsRequest = z.infer<typeof DeleteCheckpointsRequest>;

/** Response of the checkpoint delete: how many went, which steps were not there. */
export const DeleteCheckpointsResponse = z.object({
  deleted_count: z.int(),
  not_found_steps: z.array(z.int()),
});
export type DeleteCheckpointsResponse = z.infer<typeof DeleteCheckpointsResponse>;

const nullableNumber = z.number().nullable().optional();
const nullableInt = z.int().nullable().optional();
const nullableBoolean = z.boolean().nullable().optional();

/**
 * The local engine's LoRA options for real (Hugging Face) base models, in `experimental_config`
 * (RL) and `config` (SFT); ignored by the built-in models. See `docs/engine.md`.
 */
const loraOptions = {
  /** Rank of the LoRA matrices (first job of a model only; later jobs continue its adapter). @default 8 */
  lora_rank: z.int().positive().nullable().optional(),
  /** LoRA alpha; the update is scaled by `alpha / rank`. @default 16 */
  lora_alpha: z.number().positive().nullable().optional(),
  /** Linear layers adapted (transformers module names). @default all seven of q/k/v/o and gate/up/down */
  lora_target_modules: z.array(z.string()).nullable().optional(),
};

/**
 * Every RL loss some service of this family trains with, by its wire name: the hosted service's
 * contract names `cispo` and `ppo`; a Tinker server (through `TinkerBackend`'s in-process
 * service) also `importance_sampling` and `dro`. Which ones a backend offers is its `lossFns`.
 * @example
 * LossFn.parse('importance_sampling');
 */
export const LossFn = z.enum(['importance_sampling', 'ppo', 'cispo', 'dro']);
export type LossFn = z.infer<typeof LossFn>;

/**
 * RL training options. Every key is optional and nullable; real clients send all of them with
 * unset ones `null`. Which ones the local engine honours is listed in `docs/engine.md`.
 */
export const ExperimentalTrainingConfig = z.object({
  advantage_balance: nullableNumber,
  allow_training_without_logprobs: nullableBoolean,
  epsilon: nullableNumber,
  epsilon_high: nullableNumber,
  importance_sampling_level: z.enum(['token', 'sequence', 'average', 'geometric_average']).nullable().optional(),
  kimi_k2_tau: nullableNumber,
  kl_penalty_coef: nullableNumber,
  kl_penalty_reference_step: nullableInt,
  kl_penalty_source: z.enum(['current_learner', 'sample']).nullable().optional(),
  kl_penalty_step_lag: nullableInt,
  kl_ref_adapter_path: z.string().nullable().optional(),
  learning_rate: nullableNumber,
  logprob_calculation_chunk_size: nullableInt,
  loss_fn: LossFn.nullable().optional(),
  mask_prob_ratio: nullableBoolean,
  max_negative_advantage_importance_sampling_weight: nullableNumber,
  normalize_advantages: nullableBoolean,
  num_trajectories_learning_rate_multiplier_power: nullableNumber,
  packed_sequence_length: nullableInt,
  plot_tensors: nullableBoolean,
  ppo: nullableBoolean,
  precalculate_logprobs: nullableBoolean,
  scale_learning_rate_by_reward_std_dev: nullableBoolean,
  scale_rewards: nullableBoolean,
  truncated_importance_sampling: nullableNumber,
  ...loraOptions,
});
export type ExperimentalTrainingConfig = z.infer<typeof ExperimentalTrainingConfig>;

/**
 * Body of `POST /v1/preview/training-jobs` (an RL job).
 * @example
 * CreateTrainingJob.parse({ model_id, trajectory_groups: [group], experimental_config: { learning_rate: 1e-5 } });
 */
export const CreateTrainingJob = z.object({
  model_id: Uuid,
  trajectory_groups: z.array(TrajectoryGroup),
  experimental_config: ExperimentalTrainingConfig.nullable().optional(),
});
export type CreateTrainingJob = z.output<typeof CreateTrainingJob>;
/** An RL job body as it may be written before parsing. */
export type CreateTrainingJobInput = z.input<typeof CreateTrainingJob>;

/** Optional SFT metric logging (closed schema). `enabled` defaults to `false`; the step is > 0. */
export const SFTMetricLoggingConfig = z.strictObject({
  /** @default false */
  enabled: z.boolean().default(false),
  target_training_step: z.int().positive().nullable().optional(),
});
export type SFTMetricLoggingConfig = z.output<typeof SFTMetricLoggingConfig>;

/**
 * SFT options (closed schema: unknown keys are rejected, as the newer contract says).
 * `assistant_turns` defaults to `"all"`.
 */
export const SFTTrainingConfig = z.strictObject({
  batch_size: z
    .union([z.int(), z.literal('auto')])
    .nullable()
    .optional(),
  learning_rate: z
    .union([z.number(), z.array(z.number())])
    .nullable()
    .optional(),
  /** Which assistant turns are learned. @default "all" */
  assistant_turns: z.enum(['all', 'last']).default('all'),
  metric_logging: SFTMetricLoggingConfig.nullable().optional(),
  ...loraOptions,
});
export type SFTTrainingConfig = z.output<typeof SFTTrainingConfig>;
/** SFT options as they may be written before parsing. */
export type SFTTrainingConfigInput = z.input<typeof SFTTrainingConfig>;

/** Reserved SFT experimental options: no keys are supported. */
export const SFTExperimentalTrainingConfig = z.strictObject({});
export type SFTExperimentalTrainingConfig = z.infer<typeof SFTExperimentalTrainingConfig>;

/** Body of `POST /v1/preview/sft-training-jobs` (closed schema). */
export const CreateSFTTrainingJob = z.strictObject({
  model_id: Uuid,
  training_data_url: z.string(),
  config: SFTTrainingConfig.nullable().optional(),
  experimental_config: SFTExperimentalTrainingConfig.nullable().optional(),
});
export type CreateSFTTrainingJob = z.output<typeof CreateSFTTrainingJob>;
/** An SFT job body as it may be written before parsing. */
export type CreateSFTTrainingJobInput = z.input<typeof CreateSFTTrainingJob>;

/** Lifecycle of a training job. */
export const TrainingJobStatus = z.enum(['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED']);
export type TrainingJobStatus = z.infer<typeof TrainingJobStatus>;

const dateTime = z.iso.datetime({ offset: true, local: true });

/** The full training-job form of the newer contract (what the local service returns). */
export const TrainingJobDetails = z.object({
  id: Uuid,
  model_id: Uuid,
  status: TrainingJobStatus,
  progress: z.number().nullable(),
  error_message: z.string().nullable(),
  training_start: dateTime.nullable(),
  training_end: dateTime.nullable(),
  created_at: dateTime,
  updated_at: dateTime,
});
export type TrainingJobDetails = z.infer<typeof TrainingJobDetails>;

/**
 * A training job as any version of the service returns it: the older short form `{id}` or the
 * full form (see {@link TrainingJobDetails}). Fields beyond `id` are optional so that both parse,
 * but a field that is present must be well formed. Unknown keys are kept.
 */
export const TrainingJobResponse = z.looseObject({
  id: Uuid,
  model_id: Uuid.optional(),
  status: TrainingJobStatus.optional(),
  progress: z.number().nullable().optional(),
  error_message: z.string().nullable().optional(),
  training_start: dateTime.nullable().optional(),
  training_end: dateTime.nullable().optional(),
  created_at: dateTime.optional(),
  updated_at: dateTime.optional(),
});
export type TrainingJobResponse = z.infer<typeof TrainingJobResponse>;

/** Kinds of job events; `training_ended` and `training_failed` are terminal. */
export const TrainingJobEventType = z.enum(['training_started', 'gradient_step', 'training_ended', 'training_failed']);
export type TrainingJobEventType = z.infer<typeof TrainingJobEventType>;

/** True for the event types that end a job. */
export function isTerminalEventType(type: TrainingJobEventType): boolean {
  return type === 'training_ended' || type === 'training_failed';
}

/** One job event. `data` is `{num_sequences}`, a map of numbers, `{}` or `{error_message}` by type. */
export const TrainingJobEventResponse = z.object({
  id: Uuid,
  type: TrainingJobEventType,
  data: z.record(z.string(), z.unknown()),
});
export type TrainingJobEventResponse = z.infer<typeof TrainingJobEventResponse>;

/** A page of job events. */
export const TrainingJobEventPage = page(TrainingJobEventResponse);
export type TrainingJobEventPage = z.output<typeof TrainingJobEventPage>;

/**
 * A job event as a client receives it: one of the four known types, or a type a newer service
 * added, kept as its string. Job followers act on the known types and pass over the others, so a
 * service that grows a new event type does not break running training loops. (The strict
 * {@link TrainingJobEventResponse} is what the contract documents and what our service sends.)
 */
export type ReceivedTrainingJobEvent = Omit<TrainingJobEventResponse, 'type'> & {
  type: TrainingJobEventType | (string & {});
};
/** Schema of {@link ReceivedTrainingJobEvent}. */
export const ReceivedTrainingJobEvent: z.ZodType<ReceivedTrainingJobEvent> = TrainingJobEventResponse.extend({
  type: z.union([TrainingJobEventType, z.string().min(1)]),
});

/** A page of job events as a client receives it (see {@link ReceivedTrainingJobEvent}). */
export const ReceivedTrainingJobEventPage = page(ReceivedTrainingJobEvent);
export type ReceivedTrainingJobEventPage = z.output<typeof ReceivedTrainingJobEventPage>;

/** `data` of a `training_started` event: how many gradient steps (RL) or batches (SFT) follow. */
export const TrainingStartedData = z.looseObject({ num_sequences: z.int() });
export type TrainingStartedData = z.infer<typeof TrainingStartedData>;
/** `data` of a `gradient_step` event: metric name to number (numbers only). */
export const GradientStepData = z.record(z.string(), z.number());
export type GradientStepData = z.infer<typeof GradientStepData>;
/** `data` of a `training_failed` event. */
export const TrainingFailedData = z.looseObject({ error_message: z.string() });
export type TrainingFailedData = z.infer<typeof TrainingFailedData>;

/** Response of `GET /v1/preview/base-models`. */
export const BaseModelList = z.array(z.string());
export type BaseModelList = z.infer<typeof BaseModelList>;

/** One FastAPI validation issue: where (`loc`), what (`msg`) and its kind (`type`). */
export const ValidationError = z.looseObject({
  loc: z.array(z.union([z.string(), z.int()])),
  msg: z.string(),
  type: z.string(),
});
export type ValidationError = z.infer<typeof ValidationError>;

/**
 * Body of a 422 response: `{detail: [{loc, msg, type}]}`. Other error statuses carry
 * `{detail: "<message>"}`, which this schema rejects.
 */
export const HTTPValidationError = z.object({ detail: z.array(ValidationError).optional() });
export type HTTPValidationError = z.infer<typeof HTTPValidationError>;

/** One check of `GET /v1/system-check`. */
export const SystemCheckResult = z.looseObject({
  success: z.boolean(),
  duration_ms: z.number().optional(),
  error: z.string().nullable().optional(),
});
export type SystemCheckResult = z.infer<typeof SystemCheckResult>;

/**
 * What the local engine computes on, in `GET /v1/system-check`'s `gpu_queue.runtime`: onnxruntime,
 * or the tfjs-wasm fallback with the reason it runs.
 */
export const EngineRuntimeReport = z.looseObject({
  /** `onnxruntime` or `tfjs-wasm`. */
  name: z.string(),
  version: z.string(),
  /** Threads one computation uses. */
  threads: z.number().int(),
  /** Why the fallback runs; null when it was not a fallback. */
  fallback_reason: z.string().nullable(),
  /** One line, as `policyloop serve` prints it. */
  description: z.string(),
});
export type EngineRuntimeReport = z.infer<typeof EngineRuntimeReport>;

/**
 * Response of `GET /v1/system-check` as this project's local service answers it (503 when a check
 * fails): the shape the service description's prose gives. The published contract leaves the 200
 * open (an empty schema), so the client accepts any JSON ({@link SystemCheckReport}); this strict
 * shape is for checking our own service.
 */
export const SystemCheckResponse = z.looseObject({
  api: z.boolean(),
  database: z.union([z.boolean(), SystemCheckResult]),
  cpu_queue: SystemCheckResult,
  /** The engine's check; the local engine adds what it computes on (`runtime`). */
  gpu_queue: SystemCheckResult.extend({ runtime: EngineRuntimeReport.optional() }),
});
export type SystemCheckResponse = z.infer<typeof SystemCheckResponse>;

/**
 * What `client.systemCheck()` resolves to: any JSON, since the contract gives the 200 an empty
 * schema. When it is an object whose known checks have the described types, they are typed (each
 * optional, other keys kept); anything else comes as it was sent.
 * @example
 * const report = await client.systemCheck();
 * if (isSystemCheckObject(report)) console.log(report.api, report.gpu_queue?.success);
 */
export const SystemCheckReport = z.union([
  /** The object form: the checks the service description names, each optional; other keys kept. */
  z.looseObject({
    api: z.boolean().optional(),
    database: z.union([z.boolean(), SystemCheckResult]).optional(),
    cpu_queue: SystemCheckResult.optional(),
    gpu_queue: SystemCheckResult.optional(),
  }),
  z.json(),
]);
export type SystemCheckReport = z.infer<typeof SystemCheckReport>;

const SystemCheckObjectSchema = SystemCheckReport.options[0];
/** A {@link SystemCheckReport} that is an object whose known checks have the described types. */
export type SystemCheckObject = z.infer<typeof SystemCheckObjectSchema>;

/** True when `report` is an object whose known checks (each optional) have the described types. */
export function isSystemCheckObject(report: SystemCheckReport): report is SystemCheckObject {
  return SystemCheckObjectSchema.safeParse(report).success;
}

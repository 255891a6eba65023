/**
 * The narrow interface between the local service (`src/server/`) and the neural policy engine
 * (`src/engine/`). The service owns models, checkpoints, jobs, events and files on disk; the engine
 * owns weights, tokenization, sampling and gradient steps. Nothing else crosses this line.
 */
import type {
  ChatCompletionRequestBody,
  ChatCompletionResult,
  ExperimentalTrainingConfig,
  SFTRow,
  SFTTrainingConfig,
  TrajectoryGroup,
} from '../schema/index.js';
import type { EngineRuntimeInfo, EngineRuntimeName } from './onnx/onnx-runtime.js';

export type { EngineRuntimeInfo } from './onnx/onnx-runtime.js';

/**
 * Which weights to use: a base model, optionally with a trained checkpoint on top.
 * `checkpointPath` is a directory written earlier by {@link Engine.train} (null = the base weights).
 */
export interface PolicyRef {
  /** A base model id from {@link Engine.baseModels}. */
  readonly baseModel: string;
  /** Directory of a checkpoint written by `train`, or null for the base model's own weights. */
  readonly checkpointPath: string | null;
  /** Stable cache key for these weights (the service uses `<model_id>:<step>`, or the base id). */
  readonly key: string;
}

/** Numbers reported by the engine while a job runs; the service turns them into job events. */
export type EngineTrainingEvent =
  | { readonly type: 'training_started'; readonly data: { readonly num_sequences: number } }
  | { readonly type: 'gradient_step'; readonly data: Readonly<Record<string, number>> };

/** One training job handed to the engine. The engine writes the new checkpoint to `outputPath`. */
export type EngineTrainingJob =
  | {
      readonly kind: 'rl';
      /** The service's id of the model being trained (an engine that keeps state per model uses it). */
      readonly modelId?: string | undefined;
      readonly policy: PolicyRef;
      /** Directory to create and write the trained checkpoint into (weights + metadata). */
      readonly outputPath: string;
      /** Step number the new checkpoint will have (recorded in its metadata). */
      readonly step: number;
      readonly trajectoryGroups: readonly TrajectoryGroup[];
      readonly config: ExperimentalTrainingConfig | null;
      /**
       * The policy the KL penalty (`kl_penalty_coef` > 0) compares with, as the service resolved
       * `kl_ref_adapter_path`, `kl_penalty_reference_step` or `kl_penalty_step_lag`: a checkpoint
       * (or adapter) directory, or null for the base weights (LoRA off).
       * @default `kl_ref_adapter_path`, else the base weights
       */
      readonly klReference?: { readonly checkpointPath: string | null } | undefined;
      /** The runtime its passes run on; the engine sets its own. @default what `engineRuntime()` resolves */
      readonly runtime?: EngineRuntimeName | undefined;
    }
  | {
      readonly kind: 'sft';
      /** The service's id of the model being trained. */
      readonly modelId?: string | undefined;
      readonly policy: PolicyRef;
      readonly outputPath: string;
      readonly step: number;
      /** Parsed JSONL rows `{messages, tools?}`; the last assistant message(s) are learned. */
      readonly rows: readonly SFTRow[];
      readonly config: SFTTrainingConfig | null;
      /** The runtime its passes run on; the engine sets its own. @default what `engineRuntime()` resolves */
      readonly runtime?: EngineRuntimeName | undefined;
    };

/** What a finished training job reports back (stored with the checkpoint). */
export interface EngineTrainingResult {
  /** Final metrics of the job, numbers only (stored as the checkpoint's `metrics`). */
  readonly metrics: Readonly<Record<string, number>>;
}

/**
 * A policy engine: samples chat completions with logprobs and trains checkpoints.
 * Implementations must be safe to call concurrently: `chatCompletion` calls that arrive together
 * are batched into shared forward passes, and `train` runs off the caller's event loop so that
 * completions keep being answered while a job trains.
 */
export interface Engine {
  /** Ids of the trainable base models, as listed by `GET /v1/preview/base-models`. */
  baseModels(): readonly string[];

  /**
   * Samples completions for an already validated chat-completions request.
   * The engine renders the chat template (messages and tools), samples `n` choices, and returns
   * OpenAI-shaped choices (with `logprobs` when requested) and usage counts.
   * The service fills `id`, `object`, `created` and `model` around the result.
   * Throws {@link EngineInputError} for a request it cannot serve (e.g. a prompt longer than the
   * context); the service answers that with a 4xx.
   */
  chatCompletion(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    options?: { readonly signal?: AbortSignal | undefined },
  ): Promise<ChatCompletionResult>;

  /**
   * Runs one training job to completion and writes the new checkpoint to `job.outputPath`.
   * Reports `training_started` once and `gradient_step` once per optimizer step via `onEvent`.
   * Rejects with an Error whose message is fit to show the user when the job cannot be done
   * (bad data, a Choice without logprobs, ...); the service records it as `training_failed`.
   */
  train(
    job: EngineTrainingJob,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<EngineTrainingResult>;

  /**
   * The RL losses (`experimental_config.loss_fn`) the engine trains with; the service answers a
   * job naming another with a 422 that names the loss. Optional.
   * @default ['cispo', 'ppo'] (the contract's, the local engine's)
   */
  lossFns?(): readonly string[];

  /**
   * Why `id` is not among {@link baseModels}: where the engine looked and how to get the model
   * (the service answers a registration on it with this message). Optional.
   */
  describeMissingBaseModel?(id: string): string;

  /**
   * What the engine computes on (`onnxruntime` or the `tfjs-wasm` fallback, its version and
   * threads), as `policyloop serve` prints it and `GET /v1/system-check` reports it. Optional: a
   * remote engine has none of its own.
   */
  runtime?(): EngineRuntimeInfo;

  /**
   * Frees what the engine keeps outside the checkpoint directory for a checkpoint the service is
   * deleting (a remote engine's saved weights). The service deletes the directory itself, after
   * this settles, and goes on when it rejects. Optional.
   */
  deleteCheckpoint?(checkpointPath: string): Promise<void>;

  /** Frees workers and cached weights. */
  close(): Promise<void>;
}

/** A request the engine cannot serve because of its content (answered by the service as 400/422). */
export { EngineInputError } from '../text/input-error.js';

/**
 * A completion's `usage`: the prompt's and the choices' token counts, and their sum (what every
 * engine answers with).
 * @example
 * completionUsage(12, 5); // { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }
 */
export function completionUsage(promptTokens: number, completionTokens: number): ChatCompletionResult['usage'] {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/**
 * A remote engine could not reach or use what it depends on (a Tinker server that does not answer,
 * or fails the request): the service answers 503 with this message, not a bare 500.
 */
export class EngineUnavailableError extends Error {
  override readonly name = 'EngineUnavailableError';
}

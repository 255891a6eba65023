/**
 * The one interface both backends implement: where the training API is, how to reach it, and
 * (through {@link TrainingJobs}) how a training job is sent, retried or not, followed and recorded.
 */
import type { TrainingClient } from '../client/index.js';
import type {
  ExperimentalTrainingConfig,
  LossFn,
  SFTRow,
  SFTTrainingConfigInput,
  TrajectoryGroup,
  TrajectoryInput,
} from '../schema/index.js';
import type { RetentionOptions } from './checkpoint-retention.js';
import type { FollowJobOptions, JobProgress } from './follow-job.js';
import type { ObjectiveParams } from './objective-params.js';
import type { JobEndEvent, JobSubmittedEvent } from './model-events.js';
import type { ModelFiles } from './model-files.js';

export type { LossFn };

/** A live connection to a training service. */
export interface BackendConnection {
  /** Typed client of the training API. */
  readonly client: TrainingClient;
  /** Base URL of the training API, ending in `/v1`. */
  readonly baseURL: string;
  /** Base URL for OpenAI-compatible chat completions (`<inferenceBaseURL>/chat/completions`). */
  readonly inferenceBaseURL: string;
  /** Bearer key for both. */
  readonly apiKey: string;
  /** The `fetch` used for both, when one was injected (tests, proxies). */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /**
   * Whether the service is known to honour `Idempotency-Key` on its POSTs (the local service
   * does). Only then are training-job requests retried: a retry the service cannot recognise could
   * start a second job.
   * @default false
   */
  readonly honoursIdempotencyKeys?: boolean | undefined;
  /**
   * Whether the service answers the local-only routes under `/v1/local/` (metrics by step, logged
   * groups): `true` for the local service, `false` for the hosted one; when not set, a model
   * asks the service once (a 404 means no) and remembers the answer.
   * @default undefined (ask the service)
   */
  readonly localRoutes?: boolean | undefined;
}

/**
 * A training service a {@link TrainableModel} registers with: the embedded local service
 * ({@link LocalBackend}) or the hosted one ({@link HostedBackend}). Switching is a one-line change.
 */
export interface Backend {
  /** `'local'`, `'hosted'` or `'tinker'`: what kind of service this is (decides SFT data handling and defaults). */
  readonly kind: 'local' | 'hosted' | 'tinker';
  /** Directory for the local files of models (history, spool, SFT data). */
  readonly dataDir: string;
  /**
   * The RL losses this backend's service trains with (`TrainParams.lossFn`): `train` and
   * `RLTrainer.run` refuse another one before anything is sampled or sent.
   * @default not checked (a custom backend)
   */
  readonly lossFns?: readonly LossFn[] | undefined;
  /**
   * The objective's typed parameters ({@link ObjectiveParams}) this backend's service honours:
   * `train` and `RLTrainer.run` refuse another one before anything is sampled or sent.
   * @default every one (the local engine and the hosted service honour them all)
   */
  readonly objectiveParams?: readonly (keyof ObjectiveParams)[] | undefined;
  /**
   * What in a step's training parameters this backend's service cannot honour beyond
   * {@link Backend.lossFns} and {@link Backend.objectiveParams}: a combination (a clip with a loss
   * that has none), or a raw `config` key. `train` and `RLTrainer.run` refuse it with an
   * `InvalidArgumentError` before anything is sampled or sent. `argument` is the parameters' name
   * in the call (`params` for `train`, `train` for `RLTrainer`), for the message.
   * @default nothing more is checked
   * @example
   * new TinkerBackend().trainParamsProblem?.({ epsilon: 0.2 }, 'params');
   * // { parameter: 'epsilon', message: 'Expected `params.epsilon` to be left out: ... importance_sampling loss has no clip ...' }
   */
  trainParamsProblem?(params: TrainParams, argument: string): TrainParamsProblem | undefined;
  /** Connects (starting the local service on first use) and returns the connection. */
  connect(options?: { signal?: AbortSignal | undefined }): Promise<BackendConnection>;
  /**
   * The RL learning rate used when `train` is given none: the engine's tuned default on the local
   * backend, null (the service decides) on the hosted one.
   */
  defaultLearningRate(): Promise<number | null>;
  /**
   * A `training_data_url` the service can read for a JSONL file on this machine, or null when the
   * service cannot read local files (the hosted service: upload the file and pass its URL).
   */
  localFileUrl(file: string): string | null;
  /** Stops what the backend started (the local service); safe to call twice. */
  close(): Promise<void>;
  /**
   * The training work on the service: job submission (retried or not), the job journal, following
   * a job to its end, SFT data and checkpoint retention. {@link LocalBackend} and
   * {@link HostedBackend} have a `ServiceJobs` over their connection; a backend without `jobs`
   * gets one too.
   * @default a `ServiceJobs` over `connect()`
   */
  readonly jobs?: TrainingJobs | undefined;
}

/** A training parameter a backend cannot honour, and why (see {@link Backend.trainParamsProblem}). */
export interface TrainParamsProblem {
  /** The parameter's path in the training parameters, such as `epsilon` or `config.importance_sampling_level`. */
  readonly parameter: string;
  /** What was expected and what came, naming the parameter (by its full path) and the backend. */
  readonly message: string;
}

/** Options shared by calls that wait on the service. */
export interface WaitOptions {
  /** Aborts the call (and any wait in it). */
  signal?: AbortSignal | undefined;
}

/**
 * Request options of a training call that follows its job (`train`'s and `trainSFT`'s third
 * argument, `finishPendingJob`'s only one): `followTrainingJob`'s options (`signal`, `timeout`,
 * `pollInterval`, `onProgress`, also emitted as `job:progress`), declared there once.
 */
export type JobOptions = FollowJobOptions;

/**
 * The training parameters of `TrainableModel.train`, its second argument (request options such as
 * `signal` and `timeout` go in the third, a {@link JobOptions}).
 */
export interface TrainParams extends ObjectiveParams {
  /**
   * The learning rate.
   * @default the backend's: the engine's tuned value on the local backend, the service's own on the hosted one
   */
  learningRate?: number | undefined;
  /**
   * The RL loss. Each backend offers some ({@link Backend.lossFns}); another is refused before
   * anything is sampled or sent, naming the loss and the backend.
   * - `LocalBackend`: `cispo` or `ppo`. @default `cispo`
   * - `HostedBackend`: `cispo` or `ppo`. @default the service's (`cispo`)
   * - `TinkerBackend`: `importance_sampling`, `ppo`, `cispo` or `dro` (SkyRL 0.4.0 has no `dro`: it
   *   refuses it at the step). @default `importance_sampling`
   */
  lossFn?: LossFn | undefined;
  /**
   * Further `experimental_config` keys, sent as given (`learningRate`, `lossFn` and the objective's
   * typed parameters, {@link ObjectiveParams}, win).
   */
  config?: Partial<ExperimentalTrainingConfig> | undefined;
  /**
   * Train even when Choices lack logprobs (the service then uses the current policy's).
   * @default false
   */
  allowTrainingWithoutLogprobs?: boolean | undefined;
  /**
   * Drop groups sampled more than this many steps before the current one (by their
   * trajectories' `initial_policy_version`); counted in the result and the `groups:dropped` event.
   * The same bound as `RLTrainer`'s `maxStepsOffPolicy`.
   * @default no limit
   */
  maxStepsOffPolicy?: number | undefined;
  /**
   * Record the groups' metrics under `train/` in the history and send them to the log endpoint.
   * @default true
   */
  log?: boolean | undefined;
}

/** Where SFT data comes from: trajectories or `{messages}` rows, a local JSONL file, or a URL. */
export type SFTSource = readonly (TrajectoryInput | SFTRow)[] | string | URL;

/**
 * The training parameters of `TrainableModel.trainSFT`, its second argument (request options such
 * as `signal` and `timeout` go in the third, a {@link JobOptions}).
 */
export interface SFTParams {
  /**
   * The learning rate: one number, or one per batch.
   * @default the service's (the engine's tuned SFT value locally)
   */
  learningRate?: number | number[] | undefined;
  /**
   * Rows per batch, or `'auto'`.
   * @default the service's
   */
  batchSize?: number | 'auto' | undefined;
  /**
   * Which assistant turns are learned.
   * @default 'all'
   */
  assistantTurns?: 'all' | 'last' | undefined;
  /**
   * A URL the service reads the JSONL from, instead of `source` (required on the hosted service,
   * which cannot read local files: upload the file as a W&B artifact and pass its URL).
   */
  trainingDataUrl?: string | undefined;
  /**
   * Further `config` keys, sent as given (`learningRate`, `batchSize` and `assistantTurns` win):
   * the local engine's LoRA keys `lora_rank`, `lora_alpha`, `lora_target_modules` for real models.
   */
  config?: Partial<SFTTrainingConfigInput> | undefined;
}

/** What a training call returns. */
export interface TrainResult {
  /** The new step (policy version) after the job. */
  readonly step: number;
  /**
   * The step's one row of metrics, as `history.jsonl`, `model.history()` and the service hold it:
   * RL has the groups' (`train/reward`, `train/frac_reward_zero_std`, ...), the job's
   * (gradient-step averages and the checkpoint's own: `train/loss`, `train/grad_norm`, ...), the
   * batch's (`groups/dropped_*`, `rollouts/failed`) and the times (`time/train`, `time/step`,
   * and a trainer's `time/sample`, `idle/service`, `rollouts/retried`); SFT has the job's under
   * `sft/` (`sft/loss`) and its times. The families are listed in docs/training.md.
   */
  readonly metrics: Record<string, number>;
  /** The job's id. */
  readonly jobId: string;
  /**
   * Groups left out before upload (RL only): stale ones (`maxStepsOffPolicy`) and ones whose
   * rewards are all equal (no gradient); each kind is reported by a `groups:dropped` event.
   */
  readonly droppedGroups: number;
}

/** Which checkpoints `TrainableModel.pruneCheckpoints` keeps (its first argument). */
export type PruneParams = RetentionOptions;

/** What `TrainableModel.pruneCheckpoints` did. */
export interface PruneResult {
  /** Steps kept. */
  readonly kept: number[];
  /** Steps deleted. */
  readonly deleted: number[];
  /** The best step by the metric (null without `keepBestBy`). */
  readonly bestStep: number | null;
  /** Steps the service no longer had. */
  readonly notFoundSteps: number[];
}

/** What a backend's jobs know of a registered model. */
export interface JobModel {
  /** The service's id of the model. */
  readonly id: string;
  /** Its local files (the job journal sits beside `history.jsonl`; SFT data goes to `sftData`). */
  readonly files: ModelFiles;
}

/** One RL step's data, checked and filtered by the model (`prepareBatch`). */
export interface RLJobRequest {
  /** The step the groups train at (the new checkpoint will be `step + 1`). */
  readonly step: number;
  /** The groups to upload. */
  readonly groups: readonly TrajectoryGroup[];
  /**
   * The step's metrics known before its job: the groups' `train/*`, the batch's `groups/*` and
   * `rollouts/*`, a trainer's `time/sample` and `idle/service`. The step's one row holds them with
   * the job's metrics and its times (see `stepRow`).
   */
  readonly metrics: Readonly<Record<string, number>>;
  /** When the step began (`Date.now()`), for `time/step`. */
  readonly startedAt: number;
  /** Groups the model left out before upload (reported back in the result). */
  readonly droppedGroups: number;
}

/** How a backend's job reports back to its model (which turns these into its events and history). */
export interface JobReporter {
  /** Delivers the model's logged groups (the service stamps them with its current step). */
  flushLogs(signal: AbortSignal | undefined): Promise<void>;
  /** A job was created on the service. */
  submitted(event: JobSubmittedEvent): void;
  /** A job event arrived. */
  progress(progress: JobProgress): void;
  /** Writes a step's one history row, once its job is done. */
  recordRow(metrics: Readonly<Record<string, number>>, step: number): Promise<void>;
  /** A job ended and its checkpoint exists. */
  ended(event: JobEndEvent): void;
}

/**
 * The training work of a backend: how a job is sent (retried or not), journaled, followed and
 * recorded, how SFT data reaches the service, and how checkpoints are deleted. The model checks
 * its arguments and data first; nothing here validates options.
 */
export interface TrainingJobs {
  /** Journals, submits and follows one RL job to its end; records the step's history row. */
  trainRL(
    model: JobModel,
    request: RLJobRequest,
    params: TrainParams,
    options: JobOptions,
    reporter: JobReporter,
  ): Promise<TrainResult>;
  /** Finishes the RL step a killed process left under way, or resolves null when there is none. */
  finishPendingRL(model: JobModel, options: JobOptions, reporter: JobReporter): Promise<TrainResult | null>;
  /** Forgets the RL step left under way; resolves with whether there was one. */
  discardPendingRL(model: JobModel): Promise<boolean>;
  /** Resolves the SFT source to a URL the service reads, submits and follows the SFT job. */
  trainSFT(
    model: JobModel,
    source: SFTSource | undefined,
    params: SFTParams,
    options: JobOptions,
    reporter: JobReporter,
  ): Promise<TrainResult>;
  /** Deletes the checkpoints `options` does not keep, judged by `values` (a history metric by step). */
  pruneCheckpoints(
    model: JobModel,
    values: ReadonlyMap<number, number>,
    options: RetentionOptions & WaitOptions,
  ): Promise<PruneResult>;
}

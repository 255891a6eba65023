/**
 * The trainable model handle: a {@link PromptedModel} (name, inference name, `openai()`,
 * `fetch()`, `log()`) that registers with a backend, knows its step (= policy version) and trains.
 * The backend's {@link TrainingJobs} do the job work (submission, journal, following, SFT data,
 * retention); this class checks arguments and data, and keeps the model's history and logs.
 */
import { PolicyloopError } from '../internal/errors.js';
import { invalidOption, option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { computeStepMetrics, prefixMetrics } from '../schema/index.js';
import type { ModelResponse, TrajectoryGroup, TrajectoryGroupInput } from '../schema/index.js';
import type {
  Backend,
  BackendConnection,
  JobOptions,
  JobReporter,
  PruneParams,
  PruneResult,
  SFTParams,
  SFTSource,
  TrainParams,
  TrainResult,
  WaitOptions,
} from './backend.js';
import {
  checkJobOptions,
  checkSFTParams,
  checkTrainParams,
  checkWaitOptions,
  refuseUnhonouredObjective,
  refuseUnofferedLoss,
} from './job-options.js';
import { metricByStep } from './history.js';
import type { HistoryRow } from './history.js';
import { modelInferenceName } from './inference-name.js';
import { checkFlushOptions, LogBatcher } from './log-batcher.js';
import type { FlushOptions, LogBatcherOptions, LogBatcherStats, SpoolReplayResult } from './log-batcher.js';
import { ModelHistory } from './model-history.js';
import type { TrainableModelEvents } from './model-events.js';
import { modelFiles } from './model-files.js';
import type { ModelFiles } from './model-files.js';
import { ENDPOINT_AT_REGISTRATION, ModelNameShape, PromptedModel } from './prompted-model.js';
import type { InferenceEndpoint, RecordedLog } from './prompted-model.js';
import { jobsOf, latestStep } from './service-jobs.js';
import { pinnableClient, pinnableFetch } from './step-pin.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import { nothingToTrainError, prepareBatch } from './batch.js';
import type { TrainingBatch } from './batch.js';

/** The key of {@link TrainableModel}'s method that trains a checked batch (an `RLTrainer` calls it). */
export const trainBatch: unique symbol = Symbol('policyloop.trainBatch');

/** What a step's row holds besides its groups' and job's metrics. */
export interface LoopMetrics {
  /** A trainer's own metrics of the step (`time/sample`, `idle/service`, `rollouts/retried`). */
  readonly metrics: Readonly<Record<string, number>>;
  /** When the step began (`Date.now()`), for `time/step`. */
  readonly startedAt: number;
}

/** Options of `new TrainableModel(...)`. */
export interface TrainableModelOptions {
  /** The model's name, unique within its project (also a directory name: no `/`). */
  name: string;
  /** The project it belongs to. */
  project: string;
  /** The base model to train from, e.g. `policyloop/tiny-chat` (listed by `client.baseModels.list()`). */
  baseModel: string;
  /**
   * The entity (W&B team or user) that owns it.
   * @default the service's default entity for the key
   */
  entity?: string | undefined;
  /**
   * Chat-template variables sent with every chat completion of `openai()` and `fetch()` as
   * `chat_template_kwargs` (vLLM's name; the local engine and `TinkerBackend` render real models'
   * templates with them): `{ enable_thinking: false }` turns Qwen3's thinking off, so a short
   * `max_tokens` is not spent inside `<think>`. A request's own `chat_template_kwargs` (or
   * `defaults.chat_template_kwargs`) replaces it.
   * @default none
   * @example
   * new TrainableModel({ project: 'p', name: 'n', baseModel: 'Qwen/Qwen3-8B', chatTemplateKwargs: { enable_thinking: false } });
   */
  chatTemplateKwargs?: Readonly<Record<string, unknown>> | undefined;
}

const TrainableModelSchema = optionsSchema<TrainableModelOptions>()({
  ...ModelNameShape,
  baseModel: option.nonEmptyString(),
  entity: option.nonEmptyString().optional(),
  chatTemplateKwargs: option.options<Readonly<Record<string, unknown>>>().optional(),
});

const PruneParamsSchema = optionsSchema<PruneParams>()({
  keepBestBy: option
    .like<string | null>(
      (value) => value === null || (typeof value === 'string' && value.trim() !== ''),
      'a metric name or null',
    )
    .optional(),
  direction: option.oneOf(['max', 'min']).optional(),
  keepLatest: option.boolean().optional(),
  keepSteps: option
    .like<readonly number[]>(
      (value) => Array.isArray(value) && value.every((step) => Number.isInteger(step) && step >= 0),
      'an array of steps (integers >= 0)',
    )
    .optional(),
});

/** What registration established. */
interface Registration {
  readonly backend: Backend;
  readonly connection: BackendConnection;
  readonly model: ModelResponse;
  readonly files: ModelFiles;
}

/**
 * A trainable model: a name in a project, trained from a base model, on a backend.
 * @example
 * const backend = await LocalBackend.start();
 * const model = new TrainableModel({ project: 'demo', name: 'agent-1', baseModel: 'policyloop/tiny-chat' });
 * await model.register(backend);
 * const client = model.openai(); // captured into trajectories inside rollouts
 * const { step } = await model.train(groups);
 */
export class TrainableModel extends PromptedModel<TrainableModelEvents> {
  /** The base model it trains from. */
  readonly baseModel: string;
  private readonly requestedEntity: string | undefined;
  private readonly templateVariables: Readonly<Record<string, unknown>> | undefined;
  private registration: Registration | undefined;
  private batcher: LogBatcher | undefined;
  private batcherOptions: Partial<LogBatcherOptions> = {};
  private readonly metrics = new ModelHistory(
    () => {
      const registration = this.registration;
      if (registration === undefined) return undefined;
      return { connection: registration.connection, modelId: registration.model.id, files: registration.files };
    },
    {
      row: (event) => this.emit('history:row', event),
      error: (event) => this.emit('history:error', event),
      mismatch: (event) => this.emit('history:mismatch', event),
    },
  );

  /** @throws {InvalidArgumentError} for a missing or bad name, project, base model or entity. */
  constructor(options: TrainableModelOptions) {
    super(parseOptions(TrainableModelSchema, options), ENDPOINT_AT_REGISTRATION);
    this.baseModel = options.baseModel;
    this.requestedEntity = options.entity;
    this.templateVariables = options.chatTemplateKwargs === undefined ? undefined : { ...options.chatTemplateKwargs };
  }

  /** The entity: as given, or as the service reported at registration. */
  get entity(): string | undefined {
    return this.registration?.model.entity ?? this.requestedEntity;
  }

  /** The service's id of the model; throws before {@link register}. */
  get id(): string {
    return this.registered().model.id;
  }

  /** True once {@link register} succeeded. */
  get isRegistered(): boolean {
    return this.registration !== undefined;
  }

  /** The backend the model is registered with; throws before {@link register}. */
  get backend(): Backend {
    return this.registered().backend;
  }

  /** Paths of the model's local files (history, spool, SFT data); throws before {@link register}. */
  override get files(): ModelFiles {
    return this.registered().files;
  }

  /**
   * Registers with `backend` (get-or-create: the same entity, project and name give the same
   * model), connecting it first (the local backend starts its service).
   */
  async register(backend: Backend, options: WaitOptions = {}): Promise<this> {
    if (backend === null || typeof backend?.connect !== 'function') {
      throw invalidOption('backend', backend, 'a Backend (LocalBackend or HostedBackend)');
    }
    checkWaitOptions(options);
    const connection = await backend.connect({ signal: options.signal });
    const model = await connection.client.models.create(
      {
        entity: this.requestedEntity ?? null,
        project: this.project,
        name: this.name,
        base_model: this.baseModel,
        return_existing: true,
      },
      { signal: options.signal },
    );
    if (model.base_model !== this.baseModel) {
      throw new PolicyloopError(
        `Model ${model.entity}/${model.project}/${model.name} exists with base model ${model.base_model}, ` +
          `not ${this.baseModel}: use another name, or the same base model.`,
      );
    }
    if (this.registration !== undefined && this.registration.model.id !== model.id) await this.closeBatcher();
    this.registration = { backend, connection, model, files: modelFiles(backend.dataDir, this.project, this.name) };
    this.metrics.registered(connection.localRoutes);
    return this;
  }

  /**
   * The current step (= policy version): the newest checkpoint's step, 0 for the base model.
   * @example
   * const groups = await gatherTrajectoryGroups(scenarios, rollout, { sampledStep: () => model.getStep() });
   */
  async getStep(options: WaitOptions = {}): Promise<number> {
    checkWaitOptions(options);
    return latestStep(this.registered().connection, this.registered().model, options);
  }

  /** Its `chatTemplateKwargs`, sent as every request's `chat_template_kwargs` unless the request has its own. */
  protected override chatTemplateDefaults(): Readonly<Record<string, unknown>> | undefined {
    return this.templateVariables;
  }

  /**
   * The name to call the model by in chat completions: the latest step, or `step` pinned.
   * @example
   * model.inferenceName();  // 'wandb-artifact:///local/demo/agent-1'
   * model.inferenceName(3); // 'wandb-artifact:///local/demo/agent-1:step3'
   */
  override inferenceName(step?: number): string {
    const entity = this.entity;
    if (entity === undefined) {
      throw new PolicyloopError('The inference name needs the entity: register the model first, or pass `entity`.');
    }
    return modelInferenceName({ entity, project: this.project, name: this.name }, step);
  }

  /**
   * Waits until every logged group is acknowledged by the service or spooled. `signal` and
   * `timeout` stop the wait only (rejecting with `APIUserAbortError` or `LogFlushTimeoutError`).
   * @example
   * const stats = await model.flushLogs({ timeout: 30_000 });
   */
  async flushLogs(options?: FlushOptions): Promise<LogBatcherStats> {
    checkFlushOptions(options);
    return this.logBatcher().flush(options);
  }

  /** Sends log batches that an earlier run could not deliver (this model's spool file). */
  async replaySpool(options: WaitOptions = {}): Promise<SpoolReplayResult> {
    checkWaitOptions(options);
    return this.logBatcher().replaySpool(options);
  }

  /**
   * Sets the log batcher's options (batch sizes, delays, retries). Takes effect for the batcher
   * created next: call before the first `log`.
   */
  configureLogging(options: Omit<Partial<LogBatcherOptions>, 'client' | 'modelId' | 'spoolPath'>): this {
    this.batcherOptions = { ...options };
    return this;
  }

  /**
   * The model's metric history, oldest first. From a service that keeps it (the local service,
   * through `GET /v1/local/models/{id}/metrics`), one row per step with every split's metrics
   * (`train/reward`, `train/loss`, `val/reward`, ...), whichever client and data directory
   * recorded them; when `history.jsonl` disagrees with it, the service's rows are returned and a
   * `history:mismatch` event names the steps. From the hosted service (which has no such route),
   * the rows of `history.jsonl` as written.
   * @example
   * const rows = await model.history();
   * console.log(rows.map((row) => [row.training_step, row['val/reward']]));
   */
  override async history(options: WaitOptions = {}): Promise<HistoryRow[]> {
    checkWaitOptions(options);
    this.registered();
    return this.metrics.read(options);
  }

  /**
   * One RL step: checks the data, logs the groups' metrics under `train/`, submits a training job
   * with the groups that can teach something, follows its events to the end and returns the new
   * step with the step's one row of metrics. It first finishes a step an earlier call left under
   * way; then, before anything of this step happens (no history row, no log, no job), it rejects
   * with `InvalidArgumentError` when `groups` is not an array of groups, when a group or
   * trajectory has a key the schema does not know (naming it, e.g. `messages` for
   * `messages_and_choices`), or when nothing can be trained (no Choice in any trajectory, or every
   * group's rewards are equal); with `MissingLogprobsError` when a Choice has no logprobs. Groups
   * whose rewards are all equal in an otherwise trainable batch are left out of the upload (they
   * carry no gradient), counted in `train/frac_reward_zero_std` and `groups/dropped_zero_variance`
   * and reported by a `groups:dropped` event (`reason: 'zero_variance'`). Rejects with
   * `TrainingJobFailedError` when the job fails, with `TrainingTimeoutError` after
   * `options.timeout`, and with `APIUserAbortError` when `options.signal` aborts (the job goes on:
   * the next `train` or `finishPendingJob` finishes its step).
   *
   * `params` are the training parameters (learning rate, loss, staleness bound...), `options` the
   * request options (`signal`, `timeout`, `pollInterval`, `onProgress`); an unknown key in either
   * is refused.
   * @example
   * const { step, metrics } = await model.train(groups, { learningRate: 1e-5 }, { signal, onProgress: (p) => console.log(p.fraction) });
   * console.log(metrics['train/reward'], metrics['train/loss'], metrics['time/step']);
   */
  async train(
    groups: readonly TrajectoryGroupInput[],
    params: TrainParams = {},
    options: JobOptions = {},
  ): Promise<TrainResult> {
    checkTrainParams(params);
    checkJobOptions(options);
    refuseUnofferedLoss(this.registered().backend, params.lossFn, 'params.lossFn');
    refuseUnhonouredObjective(this.registered().backend, params, 'params');
    const startedAt = Date.now();
    await this.finishPendingJob(options);
    const step = await this.getStep({ signal: options.signal });
    const batch = prepareBatch(groups, {
      step,
      maxStepsOffPolicy: params.maxStepsOffPolicy,
      requireLogprobs: params.allowTrainingWithoutLogprobs !== true,
    });
    const refused = batch.nothingToTrain !== undefined;
    // A refused batch still reports the groups it left out as too stale: they are why.
    for (const event of batch.dropped)
      if (!refused || event.reason !== 'zero_variance') this.emit('groups:dropped', event);
    if (refused) throw nothingToTrainError(batch, groups);
    return this[trainBatch](batch, params, options, { metrics: {}, startedAt });
  }

  /**
   * Trains a batch checked by `prepareBatch` (by `train`, or by an `RLTrainer` that reported its
   * dropped groups itself): logs its groups under `train/`, submits the job with the groups that
   * can teach something, follows it and writes the step's one row, which holds `loop.metrics` too.
   * Not part of the public API.
   */
  async [trainBatch](
    batch: TrainingBatch,
    params: TrainParams,
    options: JobOptions,
    loop: LoopMetrics,
  ): Promise<TrainResult> {
    const { backend, model, files } = this.registered();
    const log = params.log ?? true;
    const groups = [...batch.groups];
    const groupMetrics = log ? prefixMetrics(computeStepMetrics(groups), 'train') : {};
    // The step's history row is written once the job is known to be done (see TrainingJobs).
    if (log) await this.logBatcher().add({ split: 'train', groups }, { signal: options.signal });
    // The service stamps logged groups with its current step: deliver them before the step moves.
    await this.flushBatcher(options.signal);
    const request = {
      step: batch.step,
      groups: batch.upload,
      metrics: { ...groupMetrics, ...batch.metrics, ...loop.metrics },
      startedAt: loop.startedAt,
      droppedGroups: batch.dropped.reduce((sum, event) => sum + event.count, 0),
    };
    return jobsOf(backend).trainRL({ id: model.id, files }, request, params, options, this.jobReporter());
  }

  /**
   * Finishes the RL step an earlier call (or a killed process) left under way: follows its job to
   * the end (submitting it again under the same idempotency key when the service's answer was
   * never seen, which returns the job the service made, or makes it once), then writes the step's
   * history row. Resolves with the step's result, or null when nothing was pending (or the row was
   * already written). `train()` calls it first, so a rerun after a crash leaves exactly one
   * `train/*` row per trained step and trains no step twice.
   * @example
   * const finished = await model.finishPendingJob(); // before reading model.getStep() after a crash
   */
  async finishPendingJob(options: JobOptions = {}): Promise<TrainResult | null> {
    checkJobOptions(options);
    const { backend, model, files } = this.registered();
    return jobsOf(backend).finishPendingRL({ id: model.id, files }, options, this.jobReporter());
  }

  /**
   * Forgets the RL step an earlier run left under way without finishing it: for a service that is
   * not known to honour `Idempotency-Key`, where {@link finishPendingJob} will not submit the job
   * again and rejects with `TrainingJobUncertainError` instead. Check the model's jobs on the
   * service first. Resolves with whether there was one.
   * @example
   * await model.discardPendingJob();
   */
  async discardPendingJob(): Promise<boolean> {
    const { backend, model, files } = this.registered();
    return jobsOf(backend).discardPendingRL({ id: model.id, files });
  }

  /**
   * Supervised fine-tuning: from trajectories or `{messages}` rows (the local backend writes a
   * JSONL file into the data directory and sends its `file://` URL), from a local JSONL file
   * path, or from a URL the service can read (`trainingDataUrl` or a URL `source`; the hosted
   * service needs one). Follows the job to the end and returns the new step. `params` are the
   * training parameters, `options` the request options (`signal`, `timeout`, `pollInterval`,
   * `onProgress`).
   * @example
   * await model.trainSFT([{ messages: [{ role: 'user', content: '2+2?' }, { role: 'assistant', content: '4' }] }]);
   */
  async trainSFT(
    source: SFTSource | undefined,
    params: SFTParams = {},
    options: JobOptions = {},
  ): Promise<TrainResult> {
    checkSFTParams(params);
    checkJobOptions(options);
    const { backend, model, files } = this.registered();
    return jobsOf(backend).trainSFT({ id: model.id, files }, source, params, options, this.jobReporter());
  }

  /**
   * Deletes checkpoints except the latest and the best by a history metric (which to keep in
   * `params`; `options.signal` stops the waits).
   * @example
   * const { kept, deleted } = await model.pruneCheckpoints({ keepBestBy: 'val/reward', keepLatest: true }, { signal });
   */
  async pruneCheckpoints(params: PruneParams = {}, options: WaitOptions = {}): Promise<PruneResult> {
    parseOptions(PruneParamsSchema, params, { name: 'params' });
    checkWaitOptions(options);
    const { backend, model, files } = this.registered();
    const metric = params.keepBestBy === undefined ? 'val/reward' : params.keepBestBy;
    const values = metric === null ? new Map<number, number>() : metricByStep(await this.history(options), metric);
    return jobsOf(backend).pruneCheckpoints({ id: model.id, files }, values, { ...params, signal: options.signal });
  }

  /**
   * Flushes and closes the log batcher (call before the backend closes). When `signal` aborts or
   * `timeout` passes, what is not delivered yet goes to the spool at once, and the call rejects
   * with `APIUserAbortError` or `LogFlushTimeoutError`. Resolves to null when nothing was logged.
   * @example
   * await model.close({ timeout: 10_000 });
   */
  async close(options?: FlushOptions): Promise<LogBatcherStats | null> {
    checkFlushOptions(options);
    if (this.registration !== undefined) await this.metrics.flush();
    return this.closeBatcher(options);
  }

  /** Deletes the model, its checkpoints and its run on the service (local files stay). */
  async delete(options: WaitOptions = {}): Promise<void> {
    checkWaitOptions(options);
    const { connection, model } = this.registered();
    await this.closeBatcher({ signal: options.signal });
    await connection.client.models.delete(model.id, { signal: options.signal });
    this.registration = undefined;
  }

  private registered(): Registration {
    if (this.registration === undefined) {
      throw new PolicyloopError(
        `Model ${this.project}/${this.name} is not registered: call \`await model.register(backend)\` first.`,
      );
    }
    return this.registration;
  }

  protected override endpoint(): InferenceEndpoint {
    const { connection } = this.registered();
    return { baseURL: connection.inferenceBaseURL, apiKey: connection.apiKey, fetch: connection.fetch };
  }

  // Pinnable: inside an RLTrainer's rollouts, requests for the latest name go to the rollout's step.
  protected override pinnable<T extends ChatCompletionsClient>(client: T): T {
    return pinnableClient(client);
  }

  protected override pinnableFetch(inner: typeof globalThis.fetch): typeof globalThis.fetch {
    return pinnableFetch(inner);
  }

  protected override defaultLogStep(options: WaitOptions): Promise<number> {
    return this.getStep(options);
  }

  /** Writes the row and sends the groups to the service's log endpoint through the batcher. */
  protected override async recordLog(
    groups: readonly TrajectoryGroup[],
    { split, step, send }: RecordedLog,
    options: WaitOptions,
  ): Promise<HistoryRow> {
    this.registered();
    const row = await this.metrics.record(prefixMetrics(computeStepMetrics([...groups]), split), step);
    if (send) await this.logBatcher().add({ split, groups: [...groups] }, options);
    return row;
  }

  private logBatcher(): LogBatcher {
    if (this.batcher === undefined) {
      const { connection, model, files } = this.registered();
      const batcher = new LogBatcher({
        ...this.batcherOptions,
        client: connection.client,
        modelId: model.id,
        spoolPath: files.spool,
      });
      batcher.on('batch:sent', (event) => this.emit('batch:sent', event));
      batcher.on('batch:retry', (event) => this.emit('batch:retry', event));
      batcher.on('batch:spooled', (event) => this.emit('batch:spooled', event));
      this.batcher = batcher;
    }
    return this.batcher;
  }

  private async flushBatcher(signal: AbortSignal | undefined): Promise<void> {
    if (this.batcher !== undefined) await this.batcher.flush({ signal });
  }

  private async closeBatcher(options?: FlushOptions): Promise<LogBatcherStats | null> {
    const batcher = this.batcher;
    if (batcher === undefined) return null;
    this.batcher = undefined;
    return batcher.close(options);
  }

  /** How the backend's jobs report back: the model's events and its one history row per step. */
  private jobReporter(): JobReporter {
    return {
      flushLogs: (signal) => this.flushBatcher(signal),
      submitted: (event) => this.emit('job:submitted', event),
      progress: (progress) => this.emit('job:progress', progress),
      recordRow: async (metrics, step) => {
        await this.metrics.record(metrics, step);
      },
      ended: (event) => this.emit('job:end', event),
    };
  }
}

/**
 * The trainable model handle: registers with a backend, knows its step (= policy version), hands
 * out an OpenAI client bound to it, logs metrics, trains (RL and SFT) and prunes checkpoints.
 */
import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { EventEmitter } from 'eventemitter3';
import OpenAI from 'openai';
import { APIConnectionError, APIError, NotFoundError } from '../client/errors.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import {
  booleanOption,
  enumOption,
  integerOption,
  invalidOption,
  numberOption,
  optional,
  optionsObject,
  signalOption,
  stringOption,
} from '../internal/options.js';
import { formatIssues } from '../internal/format-issues.js';
import { captureCompletions } from '../rollout/capture-completions.js';
import { captureFetch } from '../rollout/capture-fetch.js';
import { dropStaleGroups } from '../rollout/drop-stale-groups.js';
import { computeStepMetrics, prefixMetrics, TrajectoryGroup } from '../schema/index.js';
import type {
  ExperimentalTrainingConfig,
  ModelResponse,
  SFTRow,
  SFTTrainingConfigInput,
  TrajectoryGroupInput,
  TrajectoryInput,
} from '../schema/index.js';
import type { Backend, BackendConnection } from './backend.js';
import { planRetention } from './checkpoint-retention.js';
import type { RetentionOptions } from './checkpoint-retention.js';
import { TrainingJobFailedError, TrainingJobUncertainError } from './errors.js';
import { checkFollowJobOptions, followTrainingJob } from './follow-job.js';
import type { JobProgress } from './follow-job.js';
import {
  appendHistoryRow,
  compareHistories,
  historyRowsFromService,
  metricByStep,
  readHistory,
  toStepMetricsBodies,
} from './history.js';
import type { HistoryRow, ServiceStepMetrics, StepMetricsBody } from './history.js';
import { modelInferenceName } from './inference-name.js';
import { checkFlushOptions, LogBatcher } from './log-batcher.js';
import type { FlushOptions, LogBatcherOptions, LogBatcherStats, SpoolReplayResult } from './log-batcher.js';
import { assertChoicesHaveLogprobs } from './missing-logprobs.js';
import type { TrainableModelEvents, TrainingJobKind } from './model-events.js';
import { assertPathSegment, modelFiles } from './model-files.js';
import type { ModelFiles } from './model-files.js';
import { clearPendingJob, pendingJobPath, readPendingJob, writePendingJob } from './pending-job.js';
import type { PendingJob } from './pending-job.js';
import { stageSFTFile, toSFTRows, writeSFTFile } from './sft-data.js';
import { pinnableClient, pinnableFetch } from './step-pin.js';
import { assertSomethingToTrain, assertTrainingGroupsShape, hasZeroRewardVariance } from './training-input.js';

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
}

/** Options shared by calls that wait on the service. */
export interface WaitOptions {
  /** Aborts the call (and any wait in it). */
  signal?: AbortSignal | undefined;
}

/** Options of {@link TrainableModel.openai}. */
export interface OpenAIClientOptions {
  /**
   * Pin a step: requests go to `...:step<N>` instead of the latest checkpoint.
   * @default the latest step
   */
  step?: number | undefined;
  /**
   * Request parameters filled into every request where it has no value (`undefined` or `null`;
   * `model` also when it is `''`); the request's own values win. Merged over the defaults
   * `model` and `logprobs: true`.
   * @default { model: model.inferenceName(step), logprobs: true }
   */
  defaults?: Readonly<Record<string, unknown>> | undefined;
  /**
   * Per-request timeout, in milliseconds.
   * @default 600_000 (the openai SDK's)
   */
  timeout?: number | undefined;
  /**
   * Retries of the openai SDK.
   * @default 2
   */
  maxRetries?: number | undefined;
}

/** Options of {@link TrainableModel.fetch}. */
export interface ModelFetchOptions {
  /**
   * Pin a step: requests that name no model go to `...:step<N>` instead of the latest checkpoint.
   * @default the latest step
   */
  step?: number | undefined;
  /**
   * Request parameters filled into every chat-completions body where it has no value (`undefined`
   * or `null`; `model` also when it is `''`); the body's own values win. Merged over the defaults
   * `model` and `logprobs: true`.
   * @default { model: model.inferenceName(step), logprobs: true }
   */
  defaults?: Readonly<Record<string, unknown>> | undefined;
}

/** Options of {@link TrainableModel.log}. */
export interface LogOptions extends WaitOptions {
  /**
   * The split the groups belong to; metric names are prefixed with it (`val/reward`).
   * @default 'val'
   */
  split?: string | undefined;
  /**
   * The step the groups were sampled at.
   * @default the current step ({@link TrainableModel.getStep})
   */
  step?: number | undefined;
  /**
   * Also send the groups to the service's log endpoint (batched). `false` writes history only.
   * @default true
   */
  send?: boolean | undefined;
}

/** Options of a training call that follows its job. */
export interface JobOptions extends WaitOptions {
  /**
   * Overall time allowed for the job, in milliseconds.
   * @default 3_600_000
   */
  timeout?: number | undefined;
  /**
   * Longest time between event polls, in milliseconds: polls start 50 ms apart after each job
   * event and back off (doubling) to this while the job is quiet.
   * @default 1000
   */
  pollInterval?: number | undefined;
  /** Called after every job event (also emitted as `job:progress`). */
  onProgress?: ((progress: JobProgress) => void) | undefined;
}

/** Options of {@link TrainableModel.train}. */
export interface TrainOptions extends JobOptions {
  /**
   * The learning rate.
   * @default the backend's: the engine's tuned value on the local backend, the service's own on the hosted one
   */
  learningRate?: number | undefined;
  /**
   * The RL loss.
   * @default the service's (`cispo`)
   */
  lossFn?: 'cispo' | 'ppo' | undefined;
  /** Further `experimental_config` keys, sent as given (`learningRate`/`lossFn` win). */
  config?: Partial<ExperimentalTrainingConfig> | undefined;
  /**
   * Train even when Choices lack logprobs (the service then uses the current policy's).
   * @default false
   */
  allowTrainingWithoutLogprobs?: boolean | undefined;
  /**
   * Drop groups sampled more than this many steps before the current one (by their
   * trajectories' `initial_policy_version`); counted in the result and the `groups:dropped` event.
   * @default no limit
   */
  maxStaleness?: number | undefined;
  /**
   * Record the groups' metrics under `train/` in the history and send them to the log endpoint.
   * @default true
   */
  log?: boolean | undefined;
}

/** Where SFT data comes from: trajectories or `{messages}` rows, a local JSONL file, or a URL. */
export type SFTSource = readonly (TrajectoryInput | SFTRow)[] | string | URL;

/** Options of {@link TrainableModel.trainSFT}. */
export interface SFTOptions extends JobOptions {
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
   * The step's metrics, named as in `history.jsonl`: RL has the groups' metrics (`train/reward`,
   * `train/frac_reward_zero_std`, ...) and the job's (gradient-step averages and the checkpoint's
   * own: `train/loss`, `train/grad_norm`, ...); SFT has the job's under `sft/` (`sft/loss`).
   */
  readonly metrics: Record<string, number>;
  /** The job's id. */
  readonly jobId: string;
  /**
   * Groups left out before upload (RL only): stale ones (`maxStaleness`) and ones whose rewards
   * are all equal (no gradient); each kind is reported by a `groups:dropped` event.
   */
  readonly droppedGroups: number;
}

/** What {@link TrainableModel.pruneCheckpoints} did. */
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

/** What registration established. */
interface Registration {
  readonly backend: Backend;
  readonly connection: BackendConnection;
  readonly model: ModelResponse;
  readonly files: ModelFiles;
}

/** Metrics waiting to reach the local service's metrics route. */
interface PendingMetrics {
  readonly modelId: string;
  readonly body: StepMetricsBody;
  /** Kept across attempts: the service answers a repeat from the first write. */
  readonly idempotencyKey: string;
}

/** The `fetch` option type of the openai SDK. */
type OpenAIFetch = NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'];

/**
 * A trainable model: a name in a project, trained from a base model, on a backend.
 * @example
 * const backend = await LocalBackend.start();
 * const model = new TrainableModel({ project: 'demo', name: 'agent-1', baseModel: 'policyloop/tiny-chat' });
 * await model.register(backend);
 * const client = model.openai(); // captured into trajectories inside rollouts
 * const { step } = await model.train(groups);
 */
export class TrainableModel extends EventEmitter<TrainableModelEvents> {
  /** The model's name. */
  readonly name: string;
  /** Its project. */
  readonly project: string;
  /** The base model it trains from. */
  readonly baseModel: string;
  private requestedEntity: string | undefined;
  private registration: Registration | undefined;
  private batcher: LogBatcher | undefined;
  private batcherOptions: Partial<LogBatcherOptions> = {};
  /** Whether the service answers `/v1/local/` (undefined: not asked yet). */
  private localRoutes: boolean | undefined;
  private pendingMetrics: PendingMetrics[] = [];
  private sendingMetrics: Promise<void> = Promise.resolve();

  /** @throws {InvalidArgumentError} for a missing or bad name, project, base model or entity. */
  constructor(options: TrainableModelOptions) {
    super();
    optionsObject('options', options);
    for (const key of ['name', 'project', 'baseModel'] as const) stringOption(key, options[key], true);
    optional(options.entity, (entity) => stringOption('entity', entity, true));
    assertPathSegment('project', options.project);
    assertPathSegment('name', options.name);
    this.name = options.name;
    this.project = options.project;
    this.baseModel = options.baseModel;
    this.requestedEntity = options.entity;
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
  get files(): ModelFiles {
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
    this.localRoutes = connection.localRoutes;
    return this;
  }

  /**
   * The current step (= policy version): the newest checkpoint's step, 0 for the base model.
   * @example
   * const groups = await gatherTrajectoryGroups(scenarios, rollout, { policyVersion: () => model.getStep() });
   */
  async getStep(options: WaitOptions = {}): Promise<number> {
    checkWaitOptions(options);
    const { connection, model } = this.registered();
    const page = await connection.client.checkpoints.list(
      model.id,
      { limit: 1, order: 'desc' },
      { signal: options.signal },
    );
    return page.data[0]?.step ?? 0;
  }

  /**
   * The name to call the model by in chat completions: the latest step, or `step` pinned.
   * @example
   * model.inferenceName();  // 'wandb-artifact:///local/demo/agent-1'
   * model.inferenceName(3); // 'wandb-artifact:///local/demo/agent-1:step3'
   */
  inferenceName(step?: number): string {
    const entity = this.entity;
    if (entity === undefined) {
      throw new PolicyloopError('The inference name needs the entity: register the model first, or pass `entity`.');
    }
    return modelInferenceName({ entity, project: this.project, name: this.name }, step);
  }

  /**
   * An `openai` client for the backend's chat completions: exactly
   * `captureCompletions(new OpenAI({ baseURL, apiKey }), { defaults })`, with `defaults` of
   * `model` (this model's inference name) and `logprobs: true` plus `options.defaults`. Defaults
   * follow {@link captureCompletions}'s one rule: they fill a request key whose value is
   * `undefined` or `null` (`model` also when it is `''`, since the SDK's types require the key);
   * the request's own values win. Inside a rollout (`gatherTrajectoryGroups`) each completion is
   * captured into the rollout's trajectory. Inside an {@link RLTrainer}'s rollouts, a request for
   * this model's latest name (the default, or `model.inferenceName()`) goes to the step the rollout
   * is stamped with (`inferenceName(step)`), so a rollout written for `gatherTrajectoryGroups`
   * samples from the right policy unchanged.
   * @example
   * const client = model.openai();
   * const reply = await client.chat.completions.create({ model: model.inferenceName(), messages });
   */
  openai(options: OpenAIClientOptions = {}): OpenAI {
    const { connection } = this.registered();
    const defaults: Record<string, unknown> = { logprobs: true, ...options.defaults };
    const model = defaults['model'];
    if (model === undefined || model === null || model === '') defaults['model'] = this.inferenceName(options.step);
    return captureCompletions(
      pinnableClient(
        new OpenAI({
          apiKey: connection.apiKey,
          baseURL: connection.inferenceBaseURL,
          ...(connection.fetch === undefined ? {} : { fetch: connection.fetch as unknown as OpenAIFetch }),
          ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
          ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
        }),
      ),
      { defaults },
    );
  }

  /**
   * The base URL of the backend's OpenAI-compatible chat completions (ends in `/v1`): the
   * `baseURL` of a framework's provider. Throws before {@link register}.
   * @example
   * const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
   */
  get inferenceBaseURL(): string {
    return this.registered().connection.inferenceBaseURL;
  }

  /**
   * The bearer key of the backend's chat completions: the `apiKey` of a framework's provider.
   * Throws before {@link register}.
   * @example
   * const chat = new ChatOpenAI({ model: model.inferenceName(), apiKey: model.inferenceApiKey, configuration: { baseURL: model.inferenceBaseURL, fetch: model.fetch() } });
   */
  get inferenceApiKey(): string {
    return this.registered().connection.apiKey;
  }

  /**
   * A recording `fetch` for agent frameworks (AI SDK providers, LangChain's `ChatOpenAI`, Mastra,
   * an `openai` client): exactly `captureFetch({ fetch, defaults })` with `defaults` of `model`
   * (this model's inference name) and `logprobs: true` plus `options.defaults`, over the backend's
   * own `fetch` when it has one. Inside a rollout every chat completion made through it is
   * recorded into the rollout's trajectory (see {@link captureFetch}). Throws before
   * {@link register}.
   * @example
   * const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
   * const { text } = await generateText({ model: provider.chat(model.inferenceName()), prompt: 'hi' });
   */
  fetch(options: ModelFetchOptions = {}): typeof globalThis.fetch {
    optionsObject('options', options);
    optional(options.step, (step) => integerOption('step', step, { min: 0 }));
    optional(options.defaults, (defaults) => optionsObject('defaults', defaults as Record<string, unknown>));
    const { connection } = this.registered();
    const defaults: Record<string, unknown> = { logprobs: true, ...options.defaults };
    const model = defaults['model'];
    if (model === undefined || model === null || model === '') defaults['model'] = this.inferenceName(options.step);
    // Pinnable: an RLTrainer's rollouts sample the step they are stamped with, as with openai().
    return captureFetch({
      fetch: pinnableFetch(connection.fetch ?? ((...args) => globalThis.fetch(...args))),
      defaults,
    });
  }

  /**
   * Records the metrics of `groups` (prefixed by split, with `training_step`) in `history.jsonl`
   * and sends the groups to the service's log endpoint through the model's batcher. Resolves
   * with the history row once it is written and the groups are queued (`flushLogs` waits for
   * delivery).
   * @example
   * const row = await model.log(valGroups, { split: 'val' });
   * console.log(row['val/reward']);
   */
  async log(groups: readonly TrajectoryGroupInput[], options: LogOptions = {}): Promise<HistoryRow> {
    checkWaitOptions(options);
    const split = options.split ?? 'val';
    if (typeof split !== 'string' || split === '' || split.includes('/')) {
      throw invalidOption('split', split, "a name without '/'");
    }
    optional(options.step, (step) => integerOption('step', step, { min: 0 }));
    optional(options.send, (send) => booleanOption('send', send));
    const parsed = parseGroups(groups);
    const step = options.step ?? (await this.getStep(options));
    const row = await this.recordHistoryRow(prefixMetrics(computeStepMetrics(parsed), split), step);
    if (options.send ?? true) await this.logBatcher().add(split, parsed, options);
    return row;
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
  async history(options: WaitOptions = {}): Promise<HistoryRow[]> {
    checkWaitOptions(options);
    const { connection, model, files } = this.registered();
    const fileRows = await readHistory(files.history);
    if (!(await this.hasLocalRoutes(options))) return fileRows;
    await this.sendPendingMetrics();
    const items: ServiceStepMetrics[] = [];
    for await (const item of connection.client.local.metrics.list(model.id, { limit: 100 }, { signal: options.signal }))
      items.push(item);
    const rows = historyRowsFromService(items);
    const difference = compareHistories(rows, fileRows);
    if (difference !== null) this.emit('history:mismatch', { ...difference, path: files.history });
    return rows;
  }

  /**
   * One RL step: checks the data, logs the groups' metrics under `train/`, submits a training job
   * with the groups that can teach something, follows its events to the end and returns the new
   * step. Before anything happens (no history row, no log, no job) it rejects with
   * `InvalidArgumentError` when `groups` is not an array of groups, when a group or trajectory has
   * a key the schema does not know (naming it, e.g. `messages` for `messages_and_choices`), or
   * when nothing can be trained (no Choice in any trajectory, or every group's rewards are equal);
   * with `MissingLogprobsError` when a Choice has no logprobs. Groups whose rewards are all equal
   * in an otherwise trainable batch are left out of the upload (they carry no gradient), counted in
   * `train/frac_reward_zero_std` and reported by a `groups:dropped` event (`reason: 'zero_variance'`).
   * Rejects with `TrainingJobFailedError` when the job fails, and with `TrainingTimeoutError` after
   * `timeout`.
   * @example
   * const { step, metrics } = await model.train(groups, { onProgress: (p) => console.log(p.fraction) });
   * console.log(metrics['train/reward'], metrics['train/loss']);
   */
  async train(groups: readonly TrajectoryGroupInput[], options: TrainOptions = {}): Promise<TrainResult> {
    checkTrainOptions(options);
    const { connection, model, backend } = this.registered();
    assertTrainingGroupsShape(groups);
    let parsed = parseGroups(groups);
    await this.finishPendingJob(options);
    const givenIndex = new Map(parsed.map((group, index) => [group, index]));
    const currentStep = await this.getStep(options);
    let droppedGroups = 0;
    if (options.maxStaleness !== undefined) {
      const { fresh, dropped } = dropStaleGroups(parsed, currentStep, options.maxStaleness);
      droppedGroups = dropped.length;
      parsed = fresh;
      if (droppedGroups > 0) {
        const maxStaleness = options.maxStaleness;
        this.emit('groups:dropped', { reason: 'stale', count: droppedGroups, currentStep, maxStaleness });
      }
    }
    if (parsed.length === 0) {
      throw new PolicyloopError(
        `Expected at least one trajectory group to train on, got none` +
          (droppedGroups > 0 ? ` (all ${droppedGroups} were more than ${options.maxStaleness} steps stale)` : '') +
          '.',
      );
    }
    assertSomethingToTrain(parsed);
    if (options.allowTrainingWithoutLogprobs !== true) assertChoicesHaveLogprobs(parsed);

    const log = options.log ?? true;
    const groupMetrics = log ? prefixMetrics(computeStepMetrics(parsed), 'train') : {};
    // The step's history row is written once the job is known to be done (see finishJob).
    if (log) await this.logBatcher().add('train', parsed, options);
    // Equal rewards give every trajectory of the group a zero advantage: no gradient, so the
    // service is not asked to process them (the history row above still counts them).
    const equalRewards = parsed.filter(hasZeroRewardVariance);
    if (equalRewards.length > 0) {
      const groupIndexes = equalRewards.map((group) => givenIndex.get(group) ?? -1);
      parsed = parsed.filter((group) => !equalRewards.includes(group));
      droppedGroups += groupIndexes.length;
      this.emit('groups:dropped', { reason: 'zero_variance', count: groupIndexes.length, currentStep, groupIndexes });
    }
    // The service stamps logged groups with its current step: deliver them before the step moves.
    if (this.batcher !== undefined) await this.batcher.flush({ signal: options.signal });

    const learningRate = options.learningRate ?? options.config?.learning_rate ?? (await backend.defaultLearningRate());
    const config: Partial<ExperimentalTrainingConfig> = { ...options.config };
    if (learningRate !== null && learningRate !== undefined) config.learning_rate = learningRate;
    if (options.lossFn !== undefined) config.loss_fn = options.lossFn;
    if (options.allowTrainingWithoutLogprobs === true) config.allow_training_without_logprobs = true;

    // Journaled before the POST and cleared after the history row: a process killed anywhere in
    // between leaves the next train() (or finishPendingJob) enough to finish the step exactly once.
    const body = { model_id: model.id, trajectory_groups: parsed, experimental_config: config };
    const journal = pendingJobPath(this.files.history);
    const pending: PendingJob = { step: currentStep, idempotencyKey: randomUUID(), jobId: null, groupMetrics, body };
    await writePendingJob(journal, pending);
    const job = await submitJob(connection, 'rl', pending.idempotencyKey, (requestOptions) =>
      connection.client.jobs.createRL(body, { signal: options.signal, ...requestOptions }),
    );
    await writePendingJob(journal, { ...pending, jobId: job.id });
    return this.finishJob(job.id, 'rl', parsed.length, currentStep, droppedGroups, options, groupMetrics);
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
    checkFollowJobOptions(options);
    const { connection } = this.registered();
    const journal = pendingJobPath(this.files.history);
    const pending = await readPendingJob(journal);
    if (pending === null) return null;
    const rows = await readHistory(this.files.history);
    const written = rows.some(
      (row) => row.training_step === pending.step && Object.keys(row).some((name) => name.startsWith('train/')),
    );
    if (written) {
      await clearPendingJob(journal);
      return null;
    }
    let jobId = pending.jobId;
    if (jobId === null) {
      // The service's answer was never seen. Sending again under the same key returns the job the
      // service made (or makes it once), but only where the key is honoured; elsewhere a second
      // POST could start a second job, so the caller decides (see discardPendingJob).
      if (connection.honoursIdempotencyKeys !== true) {
        throw new TrainingJobUncertainError(
          'rl',
          pending.idempotencyKey,
          new PolicyloopError(
            `an earlier run submitted the job of step ${pending.step} and stopped before the service answered; ` +
              "check the model's jobs, then call `model.discardPendingJob()` to train on",
          ),
        );
      }
      const job = await submitJob(connection, 'rl', pending.idempotencyKey, (requestOptions) =>
        connection.client.jobs.createRL(pending.body, { signal: options.signal, ...requestOptions }),
      );
      jobId = job.id;
      await writePendingJob(journal, { ...pending, jobId });
    }
    const size = pending.body.trajectory_groups.length;
    return this.finishJob(jobId, 'rl', size, pending.step, 0, options, pending.groupMetrics);
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
    const journal = pendingJobPath(this.files.history);
    const pending = await readPendingJob(journal);
    if (pending === null) return false;
    await clearPendingJob(journal);
    return true;
  }

  /**
   * Supervised fine-tuning: from trajectories or `{messages}` rows (the local backend writes a
   * JSONL file into the data directory and sends its `file://` URL), from a local JSONL file
   * path, or from a URL the service can read (`trainingDataUrl` or a URL `source`; the hosted
   * service needs one). Follows the job to the end and returns the new step.
   * @example
   * await model.trainSFT([{ messages: [{ role: 'user', content: '2+2?' }, { role: 'assistant', content: '4' }] }]);
   */
  async trainSFT(source: SFTSource | undefined, options: SFTOptions = {}): Promise<TrainResult> {
    checkSFTOptions(options);
    const { connection, model, backend, files } = this.registered();
    const { url, rows } = await this.resolveSFTSource(source, options.trainingDataUrl, backend, files);
    const config: SFTTrainingConfigInput = { ...options.config };
    if (options.learningRate !== undefined) config.learning_rate = options.learningRate;
    if (options.batchSize !== undefined) config.batch_size = options.batchSize;
    if (options.assistantTurns !== undefined) config.assistant_turns = options.assistantTurns;
    const currentStep = await this.getStep(options);
    if (this.batcher !== undefined) await this.batcher.flush({ signal: options.signal });
    const job = await submitJob(connection, 'sft', randomUUID(), (requestOptions) =>
      connection.client.jobs.createSFT(
        { model_id: model.id, training_data_url: url, config },
        { signal: options.signal, ...requestOptions },
      ),
    );
    return this.finishJob(job.id, 'sft', rows, currentStep, 0, options, {});
  }

  /**
   * Deletes checkpoints except the latest and the best by a history metric.
   * @example
   * const { kept, deleted } = await model.pruneCheckpoints({ keepBestBy: 'val/reward', keepLatest: true });
   */
  async pruneCheckpoints(options: RetentionOptions & WaitOptions = {}): Promise<PruneResult> {
    checkWaitOptions(options);
    const { connection, model } = this.registered();
    const steps: number[] = [];
    const checkpoints = connection.client.checkpoints.list(
      model.id,
      { limit: 100, order: 'asc' },
      { signal: options.signal },
    );
    for await (const checkpoint of checkpoints) steps.push(checkpoint.step);
    const metric = options.keepBestBy === undefined ? 'val/reward' : options.keepBestBy;
    const values = metric === null ? new Map<number, number>() : metricByStep(await this.history(options), metric);
    const plan = planRetention(steps, values, options);
    if (plan.remove.length === 0) return { kept: plan.keep, deleted: [], bestStep: plan.bestStep, notFoundSteps: [] };
    const result = await connection.client.checkpoints.delete(
      model.id,
      { steps: plan.remove },
      { signal: options.signal },
    );
    const notFound = new Set(result.not_found_steps);
    return {
      kept: plan.keep,
      deleted: plan.remove.filter((step) => !notFound.has(step)),
      bestStep: plan.bestStep,
      notFoundSteps: result.not_found_steps,
    };
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
    if (this.registration !== undefined) await this.sendPendingMetrics();
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

  private async closeBatcher(options?: FlushOptions): Promise<LogBatcherStats | null> {
    const batcher = this.batcher;
    if (batcher === undefined) return null;
    this.batcher = undefined;
    return batcher.close(options);
  }

  /**
   * The one place a history row is recorded: appended to `history.jsonl` (the record kept for
   * the hosted service, and what `history:row` reports), then, when the service has the local
   * routes, sent to `POST /v1/local/models/{id}/metrics` (one body per split, unprefixed names,
   * with an idempotency key so the client retries it safely). A send that still fails never
   * fails the caller: it emits `history:error` and stays queued for the next row, `history()`
   * and `close()`.
   */
  private async recordHistoryRow(metrics: Readonly<Record<string, number>>, step: number): Promise<HistoryRow> {
    const { model, files } = this.registered();
    const row = await appendHistoryRow(files.history, metrics, step);
    this.emit('history:row', { row, path: files.history });
    if (await this.hasLocalRoutes()) {
      for (const body of toStepMetricsBodies(metrics, step))
        this.pendingMetrics.push({ modelId: model.id, body, idempotencyKey: randomUUID() });
      await this.sendPendingMetrics();
    }
    return row;
  }

  /**
   * Whether the service answers `/v1/local/`: the connection says so, or (a backend that does
   * not) one `GET /v1/local/models/{id}` tells, a 404 meaning no. Another failure answers no for
   * now and asks again next time.
   */
  private async hasLocalRoutes(options: WaitOptions = {}): Promise<boolean> {
    if (this.localRoutes !== undefined) return this.localRoutes;
    const { connection, model } = this.registered();
    try {
      await connection.client.local.models.retrieve(model.id, { signal: options.signal });
      this.localRoutes = true;
    } catch (error) {
      if (error instanceof NotFoundError) this.localRoutes = false;
      else if (options.signal?.aborted === true) throw error;
      return false;
    }
    return true;
  }

  /** Sends the queued metrics in order, one sender at a time; stops at the first failure. */
  private sendPendingMetrics(): Promise<void> {
    this.sendingMetrics = this.sendingMetrics.then(async () => {
      const connection = this.registration?.connection;
      // A deleted model's metrics have nowhere to go.
      if (connection === undefined) this.pendingMetrics = [];
      while (connection !== undefined && this.pendingMetrics.length > 0) {
        const next = this.pendingMetrics[0] as PendingMetrics;
        try {
          await connection.client.local.metrics.create(next.modelId, next.body, {
            idempotencyKey: next.idempotencyKey,
          });
          this.pendingMetrics.shift();
        } catch (error) {
          // A refusal (4xx other than 408/409/429) will not change on a retry: drop it, loudly.
          const permanent =
            error instanceof APIError &&
            error.status !== undefined &&
            error.status >= 400 &&
            error.status < 500 &&
            ![408, 409, 429].includes(error.status);
          if (permanent) this.pendingMetrics.shift();
          const { step, split } = next.body;
          this.emit('history:error', { error, step, split, dropped: permanent, pending: this.pendingMetrics.length });
          if (!permanent) return;
        }
      }
    });
    return this.sendingMetrics;
  }

  private async finishJob(
    jobId: string,
    kind: TrainingJobKind,
    size: number | null,
    previousStep: number,
    droppedGroups: number,
    options: JobOptions,
    groupMetrics: Readonly<Record<string, number>>,
  ): Promise<TrainResult> {
    const { connection, model } = this.registered();
    this.emit('job:submitted', { jobId, kind, size });
    const journal = pendingJobPath(this.files.history);
    let followed: Awaited<ReturnType<typeof followTrainingJob>>;
    try {
      followed = await followTrainingJob(connection.client, jobId, {
        signal: options.signal,
        timeout: options.timeout,
        pollInterval: options.pollInterval,
        onProgress: (progress) => {
          this.emit('job:progress', progress);
          options.onProgress?.(progress);
        },
      });
    } catch (error) {
      // A failed job trained nothing: nothing is left pending. (An abort or a timeout leaves the
      // journal, so that the next call finishes the step.)
      if (kind === 'rl' && error instanceof TrainingJobFailedError) await clearPendingJob(journal);
      throw error;
    }
    const page = await connection.client.checkpoints.list(
      model.id,
      { limit: 1, order: 'desc' },
      { signal: options.signal },
    );
    const checkpoint = page.data[0];
    const step = checkpoint?.step ?? 0;
    const jobMetrics = { ...followed.metrics, ...checkpoint?.metrics };
    // Job metrics describe training on the data of `previousStep`; trajectory metrics of that
    // step (already in its `train/` row) are not repeated.
    const jobRow: Record<string, number> = {};
    for (const [name, value] of Object.entries(jobMetrics)) {
      if (!TRAJECTORY_METRIC_NAMES.has(name)) jobRow[`${kind === 'sft' ? 'sft' : 'train'}/${name}`] = value;
    }
    // One row per step, written once the job is done: the groups' metrics and the job's.
    const metrics = { ...groupMetrics, ...jobRow };
    if (Object.keys(metrics).length > 0) await this.recordHistoryRow(metrics, previousStep);
    if (kind === 'rl') await clearPendingJob(journal);
    this.emit('job:end', { jobId, kind, step, metrics });
    return { step, metrics, jobId, droppedGroups };
  }

  private async resolveSFTSource(
    source: SFTSource | undefined,
    trainingDataUrl: string | undefined,
    backend: Backend,
    files: ModelFiles,
  ): Promise<{ url: string; rows: number | null }> {
    if (trainingDataUrl !== undefined) return { url: trainingDataUrl, rows: null };
    if (source instanceof URL) return { url: source.href, rows: null };
    if (typeof source === 'string') {
      if (/^[a-z][a-z0-9+.-]+:/i.test(source)) return { url: source, rows: null };
      const file = path.resolve(source);
      const url = backend.localFileUrl(file);
      if (url === null) throw hostedNeedsUrl(backend);
      try {
        await stat(file);
      } catch (error) {
        throw new InvalidArgumentError('source', `Expected an SFT JSONL file at ${file}, but it cannot be read`, {
          cause: error,
        });
      }
      // The local service reads file:// data only from the models' sft-data folders (and the
      // roots it is given): the file goes there, linked when it can be (docs/training.md).
      const staged = backend.localFileUrl(await stageSFTFile(files.sftData, file));
      return { url: staged ?? url, rows: null };
    }
    if (source === undefined) {
      throw new InvalidArgumentError(
        'source',
        'Expected `source` to be trajectories, `{messages}` rows, a JSONL path or a URL (or pass `trainingDataUrl`), ' +
          'got undefined',
      );
    }
    if (backend.localFileUrl(files.sftData) === null) throw hostedNeedsUrl(backend);
    const rows = toSFTRows(source);
    const file = await writeSFTFile(files.sftData, rows);
    const url = backend.localFileUrl(file);
    if (url === null) throw hostedNeedsUrl(backend);
    return { url, rows: rows.length };
  }
}

/** Metric names of the trajectory data that a job may repeat; history already has them per split. */
const TRAJECTORY_METRIC_NAMES = new Set([
  'reward',
  'reward_std_dev',
  'num_trajectories',
  'num_groups_submitted',
  'exception_rate',
]);

function hostedNeedsUrl(backend: Backend): InvalidArgumentError {
  return new InvalidArgumentError(
    'source',
    `The ${backend.kind} service cannot read SFT data from this machine: write the rows as JSONL, upload the ` +
      'file (a W&B artifact) and pass its URL as `trainingDataUrl` (see docs/hosted.md).',
  );
}

function parseGroups(groups: readonly TrajectoryGroupInput[]): TrajectoryGroup[] {
  return groups.map((group, index) => {
    const result = TrajectoryGroup.safeParse(group);
    if (!result.success) {
      const issues = formatIssues(result.error.issues);
      throw new InvalidArgumentError(
        'groups',
        `Expected trajectory group ${index} to be a TrajectoryGroup: ${issues}`,
        {
          cause: result.error,
        },
      );
    }
    return result.data;
  });
}

/** Checks `options.signal` of a call that only waits; a bad one throws before any request. */
function checkWaitOptions(options: WaitOptions): void {
  optionsObject('options', options);
  optional(options.signal, (signal) => signalOption('signal', signal));
}

const POSITIVE = { min: 0, exclusiveMin: true } as const;

/** Checks the options of `train` before anything is logged or sent. */
function checkTrainOptions(options: TrainOptions): void {
  checkFollowJobOptions(options);
  optional(options.learningRate, (rate) => numberOption('learningRate', rate, POSITIVE));
  optional(options.lossFn, (lossFn) => enumOption('lossFn', lossFn, ['cispo', 'ppo']));
  optional(options.allowTrainingWithoutLogprobs, (allow) => booleanOption('allowTrainingWithoutLogprobs', allow));
  optional(options.maxStaleness, (steps) =>
    numberOption('maxStaleness', steps, { min: 0, allowInfinity: true, unit: 'steps' }),
  );
  optional(options.log, (log) => booleanOption('log', log));
  optional(options.config, (config) => {
    if (typeof config !== 'object' || config === null || Array.isArray(config)) {
      throw invalidOption('config', config, 'an object of `experimental_config` keys');
    }
  });
}

/** Checks the options of `trainSFT` before anything is written or sent. */
function checkSFTOptions(options: SFTOptions): void {
  checkFollowJobOptions(options);
  optional(options.learningRate, (rate) => {
    if (Array.isArray(rate)) rate.forEach((item, index) => numberOption(`learningRate[${index}]`, item, POSITIVE));
    else numberOption('learningRate', rate, POSITIVE);
  });
  optional(options.batchSize, (size) => {
    if (size !== 'auto' && !(Number.isInteger(size) && (size as number) >= 1)) {
      throw invalidOption('batchSize', size, "an integer >= 1 or 'auto'");
    }
  });
  optional(options.assistantTurns, (turns) => enumOption('assistantTurns', turns, ['all', 'last']));
  optional(options.trainingDataUrl, (url) => stringOption('trainingDataUrl', url, true));
}

/**
 * Sends a training-job POST with one `Idempotency-Key` for the job. A service known to honour the
 * key gets the client's usual retries (each one is recognised: one job). Any other service gets a
 * single attempt: a failure that leaves open whether the job was created becomes a
 * {@link TrainingJobUncertainError} instead of a blind retry.
 */
async function submitJob<T>(
  connection: BackendConnection,
  kind: 'rl' | 'sft',
  idempotencyKey: string,
  send: (options: { idempotencyKey: string; maxRetries?: number }) => Promise<T>,
): Promise<T> {
  if (connection.honoursIdempotencyKeys === true) return send({ idempotencyKey });
  try {
    return await send({ idempotencyKey, maxRetries: 0 });
  } catch (error) {
    const uncertain = error instanceof APIConnectionError || (error instanceof APIError && error.status >= 500);
    throw uncertain ? new TrainingJobUncertainError(kind, idempotencyKey, error) : error;
  }
}

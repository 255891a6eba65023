/**
 * An {@link Engine} whose weights live on a Tinker server. The local service keeps models,
 * checkpoints, jobs, events and history as for its own engine; this engine renders and tokenizes
 * every request on this machine (the model's own tokenizer and chat template, from the Hugging
 * Face cache or the model folder), samples it on the server, parses the reply (tool calls, Qwen3's
 * `<think>`), and trains by sending token ids and per-token loss inputs.
 *
 * A checkpoint of the service is a small `tinker.json` in its directory: the server's training
 * model, the sampler weights (`save_weights_for_sampler`) that serve its completions, and the
 * resumable state (`save_weights`) a new training model loads when the old one is gone.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type {
  ChatCompletionRequestBody,
  ChatCompletionResult,
  Choice,
  ExperimentalTrainingConfig,
} from '../../schema/index.js';
import { buildHfRlData, buildHfSftSequences } from '../../engine/hf/training-data.js';
import type { TrainingSequence } from '../../engine/training-data.js';
import { EngineInputError, EngineUnavailableError } from '../../engine/types.js';
import type {
  Engine,
  EngineTrainingEvent,
  EngineTrainingJob,
  EngineTrainingResult,
  PolicyRef,
} from '../../engine/types.js';
import { buildHfChoice } from '../../text/choice.js';
import type { SampledText } from '../../text/choice.js';
import { textFolderOf } from '../../text/hub-cache.js';
import { loadDefaultTextLayer } from '../../text/loader.js';
import type { TextLayer, TextLayerLoader } from '../../text/loader.js';
import { promptTokens } from '../../text/prompt.js';
import { APIError } from '../../client/errors.js';
import { TINKER_DEFAULT_LEARNING_RATE } from './defaults.js';
import { TinkerRequestFailedError } from './errors.js';
import type { LoraSettings, TinkerClient, TinkerDatum, TinkerSequence } from './tinker-client.js';

/** Rows per SFT batch when `batch_size` is `"auto"`, null or absent. */
const AUTO_SFT_BATCH_SIZE = 16;
/** Completion tokens when a request names no `max_tokens` (and the context leaves room). */
const DEFAULT_MAX_TOKENS = 4096;
/** The file of a checkpoint directory that says where its weights are on the server. */
export const TINKER_CHECKPOINT_FILE = 'tinker.json';

/** What a checkpoint directory of a Tinker-backed model records. */
export interface TinkerCheckpointRecord {
  /** The server's base URL when the checkpoint was made. */
  readonly server: string;
  readonly baseModel: string;
  /** The server's training model that produced it. */
  readonly trainingModelId: string;
  /** Sampler weights (`tinker://…`): completions of this checkpoint sample from them. */
  readonly samplerPath: string;
  /** Resumable weights and optimizer state (`tinker://…/weights/…`); null when not saved (`resumableState: false`). */
  readonly statePath: string | null;
  readonly step: number;
  readonly lora: LoraSettings;
}

/** Options of {@link TinkerEngine}. */
export interface TinkerEngineOptions {
  /** An open client (its session is this engine's). */
  readonly client: TinkerClient;
  /** The server's base URL, recorded in checkpoints. */
  readonly server: string;
  /** The base models the server trains. */
  readonly baseModels: readonly string[];
  /** LoRA settings of the training models this engine creates. */
  readonly lora: LoraSettings;
  /** Save each step's resumable state (`save_weights`) besides its sampler weights. @default true */
  readonly resumableState?: boolean | undefined;
  /** Environment for the Hugging Face cache. @default process.env */
  readonly env?: NodeJS.ProcessEnv | undefined;
  /** Loads a folder's text layer. @default the text layer of `src/text/` */
  readonly textLayer?: TextLayerLoader | undefined;
}

interface TrainingModel {
  readonly id: string;
  /** The checkpoint directory whose weights the server's model holds now (null: fresh). */
  checkpointPath: string | null;
}

/**
 * Whether the server lost what a request named: a session or model it no longer has (404), or,
 * after a restart, a training model that is no longer loaded (SkyRL: 400 "Model … not loaded").
 */
function isGone(error: unknown): boolean {
  if (error instanceof APIError) return error.status === 404;
  return error instanceof TinkerRequestFailedError && /not found|not loaded/i.test(error.message);
}

/** Reads a checkpoint directory's record. */
export async function readTinkerCheckpoint(directory: string): Promise<TinkerCheckpointRecord> {
  const file = path.join(directory, TINKER_CHECKPOINT_FILE);
  try {
    return JSON.parse(await readFile(file, 'utf8')) as TinkerCheckpointRecord;
  } catch (error) {
    throw new Error(
      `${file} could not be read (${error instanceof Error ? error.message : String(error)}): this checkpoint was not trained on a Tinker server.`,
    );
  }
}

/** The Tinker server as the local service's engine. */
export class TinkerEngine implements Engine {
  private readonly texts = new Map<string, Promise<{ text: TextLayer; contextLength: number }>>();
  private readonly samplers = new Map<string, Promise<string>>();
  private readonly records = new Map<string, Promise<TinkerCheckpointRecord>>();
  private readonly models = new Map<string, TrainingModel>();
  /** Checkpoints whose sampler weights were saved again from their state (their training model was gone). */
  private readonly reloaded = new Map<string, Promise<{ trainingModelId: string; samplerPath: string }>>();
  private readonly loadText: TextLayerLoader;
  private closed = false;

  constructor(private readonly options: TinkerEngineOptions) {
    this.loadText = options.textLayer ?? loadDefaultTextLayer;
  }

  /** The base models the server trains. */
  baseModels(): readonly string[] {
    return this.options.baseModels;
  }

  /** Why `id` cannot be registered: the server does not train it. */
  describeMissingBaseModel(id: string): string {
    return `The Tinker server at ${this.options.server} trains ${this.options.baseModels.map((model) => JSON.stringify(model)).join(', ') || 'no base model'}, not ${JSON.stringify(id)} (its get_server_capabilities)`;
  }

  private textOf(baseModel: string): Promise<{ text: TextLayer; contextLength: number }> {
    let loading = this.texts.get(baseModel);
    if (!loading) {
      loading = (async () => {
        const folder = textFolderOf(baseModel, this.options.env ?? process.env);
        const text = await this.loadText(folder);
        let contextLength = 32_768;
        try {
          const config = JSON.parse(await readFile(path.join(folder, 'config.json'), 'utf8')) as Record<
            string,
            unknown
          >;
          const length = config['max_position_embeddings'];
          if (typeof length === 'number' && Number.isInteger(length) && length > 0) contextLength = length;
        } catch {
          // No config.json beside the tokenizer: keep the default context.
        }
        return { text, contextLength };
      })();
      loading.catch(() => this.texts.delete(baseModel));
      this.texts.set(baseModel, loading);
    }
    return loading;
  }

  private recordOf(checkpointPath: string): Promise<TinkerCheckpointRecord> {
    let reading = this.records.get(checkpointPath);
    if (!reading) {
      reading = readTinkerCheckpoint(checkpointPath);
      reading.catch(() => this.records.delete(checkpointPath));
      this.records.set(checkpointPath, reading);
    }
    return reading;
  }

  /** The sampling session of a policy's weights (the base model's, or a checkpoint's sampler weights). */
  private async samplerOf(policy: PolicyRef, signal: AbortSignal | undefined, fresh = false): Promise<string> {
    const source =
      policy.checkpointPath === null
        ? { baseModel: policy.baseModel }
        : {
            modelPath:
              (await this.reloaded.get(policy.checkpointPath)?.catch(() => undefined))?.samplerPath ??
              (await this.recordOf(policy.checkpointPath)).samplerPath,
          };
    const key = 'baseModel' in source ? `base:${source.baseModel}` : source.modelPath;
    if (fresh) this.samplers.delete(key);
    let session = this.samplers.get(key);
    if (!session) {
      session = this.options.client.createSamplingSession(source, { signal });
      session.catch(() => this.samplers.delete(key));
      this.samplers.set(key, session);
    }
    return session;
  }

  /** Renders the request, samples it on the server and parses the replies. */
  async chatCompletion(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    options: { readonly signal?: AbortSignal | undefined } = {},
  ): Promise<ChatCompletionResult> {
    if (this.closed) throw new Error('The Tinker engine is closed.');
    const { text, contextLength } = await this.textOf(policy.baseModel);
    for (const message of request.messages) {
      const content = (message as { content?: unknown }).content;
      if (
        Array.isArray(content) &&
        content.some((part) => !['text', 'refusal'].includes((part as { type?: string }).type ?? ''))
      )
        throw new EngineInputError(
          'Tinker models are served text only here: image, audio and file parts are not supported.',
          ['body', 'messages'],
        );
    }
    const prompt = promptTokens(text, request.messages, request.tools);
    if (prompt.length >= contextLength)
      throw new EngineInputError(
        `The prompt is ${prompt.length} tokens long, but ${policy.baseModel} has a context of ${contextLength} tokens: shorten the messages or tools.`,
        ['body', 'messages'],
      );
    const room = contextLength - prompt.length;
    const maxTokens = Math.min(room, request.max_completion_tokens ?? request.max_tokens ?? DEFAULT_MAX_TOKENS);
    const stops =
      request.stop === null || request.stop === undefined
        ? []
        : typeof request.stop === 'string'
          ? [request.stop]
          : request.stop;
    const params = {
      promptTokens: prompt,
      numSamples: request.n ?? 1,
      maxTokens,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
      seed: request.seed ?? undefined,
      stopTokens: text.stopTokenIds,
    };
    let result;
    try {
      try {
        result = await this.options.client.sample(await this.samplerOf(policy, options.signal), params, options);
      } catch (error) {
        if (!isGone(error)) throw error;
        // The session, or the training model behind a checkpoint's sampler weights, is gone (the
        // server restarted, or the model was unloaded): load the checkpoint's state into a new
        // model and save its sampler weights again, then open a new session, once.
        if (policy.checkpointPath !== null) await this.reload(policy.checkpointPath, options.signal);
        result = await this.options.client.sample(await this.samplerOf(policy, options.signal, true), params, options);
      }
    } catch (error) {
      if (options.signal?.aborted) throw error;
      throw new EngineUnavailableError(
        `The Tinker server at ${this.options.server} could not sample: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
    const tools = request.tools ?? [];
    const shape = {
      logprobs: request.logprobs === true,
      tokensAsIds: request.return_tokens_as_token_ids === true,
      parseTools: tools.length > 0 && request.tool_choice !== 'none',
      makeId: () => `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
      text,
      tools,
    };
    let completionTokens = 0;
    const choices: Choice[] = result.sequences.map((sequence, index) => {
      const sampled = sampledText(sequence, text, stops);
      completionTokens += sequence.tokens.length;
      return {
        ...buildHfChoice(sampled, index, shape),
        // Token in, token out: training uses these ids and never tokenizes the sampled text again.
        prompt_token_ids: prompt,
        token_ids: [...sampled.tokens],
      } as Choice;
    });
    return {
      choices,
      usage: {
        prompt_tokens: prompt.length,
        completion_tokens: completionTokens,
        total_tokens: prompt.length + completionTokens,
      },
    };
  }

  /** Saves a checkpoint's sampler weights again, from its saved state, in a new training model (once at a time). */
  private reload(
    checkpointPath: string,
    signal: AbortSignal | undefined,
  ): Promise<{ trainingModelId: string; samplerPath: string }> {
    const known = this.reloaded.get(checkpointPath);
    const reloading = (async () => {
      const previous = await known?.catch(() => undefined);
      const record = await this.recordOf(checkpointPath);
      if (record.statePath === null)
        throw new Error(
          `The Tinker server no longer has the sampler weights of ${checkpointPath}, and that checkpoint has no saved state to load them from (resumableState: false).`,
        );
      const client = this.options.client;
      if (previous) void client.unloadModel(previous.trainingModelId).catch(() => undefined);
      const id = await client.createModel(record.baseModel, record.lora, { signal });
      await client.loadWeights(id, record.statePath, { signal });
      const name = `reloaded-step${record.step}-${randomUUID().slice(0, 8)}`;
      return { trainingModelId: id, samplerPath: await client.saveWeightsForSampler(id, name, { signal }) };
    })();
    reloading.catch(() => {
      if (this.reloaded.get(checkpointPath) === reloading) this.reloaded.delete(checkpointPath);
    });
    this.reloaded.set(checkpointPath, reloading);
    return reloading;
  }

  /**
   * The server's training model for `modelId`, holding the weights of `checkpointPath`: the one
   * this engine used last, or a new one (loaded with the checkpoint's saved state when there is one).
   */
  private async trainingModel(
    modelId: string,
    baseModel: string,
    checkpointPath: string | null,
    signal: AbortSignal | undefined,
  ): Promise<TrainingModel> {
    const known = this.models.get(modelId);
    if (known && known.checkpointPath === checkpointPath) return known;
    const client = this.options.client;
    // The server holds few adapters at once: free the one this model held (best effort).
    if (known) void client.unloadModel(known.id).catch(() => undefined);
    this.models.delete(modelId);
    const record = checkpointPath === null ? null : await this.recordOf(checkpointPath);
    const id = await client.createModel(baseModel, record?.lora ?? this.options.lora, { signal });
    if (record && record.statePath === null)
      throw new Error(
        `The Tinker server no longer holds the training model of ${checkpointPath}, and that checkpoint has no saved state to resume from (it was trained with resumableState: false): train on from a new model, or keep resumableState on.`,
      );
    if (record?.statePath) {
      try {
        await client.loadWeights(id, record.statePath, { signal });
      } catch (error) {
        void client.unloadModel(id, { signal: AbortSignal.timeout(30_000) }).catch(() => undefined);
        throw error;
      }
    }
    const model = { id, checkpointPath };
    this.models.set(modelId, model);
    return model;
  }

  /** Drops a model's training model, unloading it on the server (best effort). */
  private forget(modelId: string): void {
    const known = this.models.get(modelId);
    this.models.delete(modelId);
    if (known)
      void this.options.client.unloadModel(known.id, { signal: AbortSignal.timeout(30_000) }).catch(() => undefined);
  }

  /** Runs an RL or SFT job on the server and writes the checkpoint record. */
  async train(
    job: EngineTrainingJob,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<EngineTrainingResult> {
    if (this.closed) throw new Error('The Tinker engine is closed.');
    const modelId = job.modelId ?? path.basename(path.dirname(job.outputPath));
    const { text } = await this.textOf(job.policy.baseModel);
    const signal = options.signal;
    let model: TrainingModel;
    try {
      model = await this.trainingModel(modelId, job.policy.baseModel, job.policy.checkpointPath, signal);
    } catch (error) {
      this.models.delete(modelId);
      throw error;
    }
    const client = this.options.client;
    let metrics: Record<string, number>;
    try {
      metrics =
        job.kind === 'rl'
          ? await this.trainRl(job, text, model.id, options)
          : await this.trainSft(job, text, model.id, options);
    } catch (error) {
      // The server's model may hold half a step: the next job starts from the checkpoint again.
      this.forget(modelId);
      throw error;
    }
    const name = `step${job.step}-${randomUUID().slice(0, 8)}`;
    let samplerPath: string;
    let statePath: string | null;
    try {
      [samplerPath, statePath] = await Promise.all([
        client.saveWeightsForSampler(model.id, name, { signal }),
        this.options.resumableState === false ? null : client.saveWeights(model.id, `state-${name}`, { signal }),
      ]);
    } catch (error) {
      this.forget(modelId);
      throw error;
    }
    const record: TinkerCheckpointRecord = {
      server: this.options.server,
      baseModel: job.policy.baseModel,
      trainingModelId: model.id,
      samplerPath,
      statePath,
      step: job.step,
      lora:
        job.policy.checkpointPath === null ? this.options.lora : (await this.recordOf(job.policy.checkpointPath)).lora,
    };
    await mkdir(job.outputPath, { recursive: true });
    await writeFile(path.join(job.outputPath, TINKER_CHECKPOINT_FILE), `${JSON.stringify(record, null, 2)}\n`);
    model.checkpointPath = job.outputPath;
    return { metrics };
  }

  private async trainRl(
    job: Extract<EngineTrainingJob, { kind: 'rl' }>,
    text: TextLayer,
    trainingModelId: string,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<Record<string, number>> {
    const data = buildHfRlData(job.trajectoryGroups, job.config, text);
    const sequences = data.sequences.filter((sequence) => sequence.mask.includes(1));
    if (sequences.length === 0)
      throw new Error(
        `Nothing to train: ${data.groupsSubmitted} group(s), ${data.groupsTrainable} with different rewards, and no learned token among them.`,
      );
    options.onEvent({ type: 'training_started', data: { num_sequences: 1 } });
    const datums = sequences.map(rlDatum);
    const lossFn = lossFunctionOf(job.config);
    const learningRate = job.config?.learning_rate ?? TINKER_DEFAULT_LEARNING_RATE;
    const client = this.options.client;
    // Submitted back to back: the server runs them in seq_id order.
    const [output, optimizer] = await Promise.all([
      client.forwardBackward(trainingModelId, datums, lossFn, { signal: options.signal }),
      client.optimStep(trainingModelId, { learningRate }, { signal: options.signal }),
    ]);
    let learned = 0;
    let lossSum = 0;
    let klSum = 0;
    let ratioSum = 0;
    output.outputs.forEach((datumOutput, index) => {
      const datum = datums[index] as TinkerDatum;
      const weights = datum.advantages ?? [];
      datumOutput.logprobs.forEach((current, position) => {
        if ((sequences[index] as TrainingSequence).mask[position + 1] !== 1) return;
        const sampled = (datum.logprobs ?? [])[position] ?? current;
        learned += 1;
        klSum += sampled - current;
        ratioSum += Math.exp(current - sampled);
        lossSum += datumOutput.elementwiseLoss?.[position] ?? -Math.exp(current - sampled) * (weights[position] ?? 0);
      });
    });
    const serverLoss = output.metrics['loss:sum'];
    const metrics: Record<string, number> = {
      loss: learned > 0 ? lossSum / learned : (serverLoss ?? 0),
      learning_rate: learningRate,
      ...optimizerMetrics(optimizer),
      num_trajectories: data.trajectories,
      num_trainable_tokens: learned,
      num_groups_submitted: data.groupsSubmitted,
      num_groups_trainable: data.groupsTrainable,
      reward: data.reward,
      reward_std_dev: data.rewardStdDev,
      importance_ratio: learned > 0 ? ratioSum / learned : 1,
      kl_div: learned > 0 ? klSum / learned : 0,
      ...serverMetrics(output.metrics),
    };
    options.onEvent({ type: 'gradient_step', data: metrics });
    return metrics;
  }

  private async trainSft(
    job: Extract<EngineTrainingJob, { kind: 'sft' }>,
    text: TextLayer,
    trainingModelId: string,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<Record<string, number>> {
    const sequences = buildHfSftSequences(job.rows, job.config?.assistant_turns ?? 'all', text);
    const requested = job.config?.batch_size;
    if (typeof requested === 'number' && !(Number.isInteger(requested) && requested >= 1))
      throw new Error(`config.batch_size must be a positive integer or "auto", got ${requested}.`);
    const batchSize =
      typeof requested === 'number' ? requested : Math.min(AUTO_SFT_BATCH_SIZE, Math.max(1, sequences.length));
    const batches: TrainingSequence[][] = [];
    for (let start = 0; start < sequences.length; start += batchSize)
      batches.push(sequences.slice(start, start + batchSize));
    const rates = job.config?.learning_rate;
    options.onEvent({ type: 'training_started', data: { num_sequences: batches.length } });
    const client = this.options.client;
    let metrics: Record<string, number> = {};
    let totalTokens = 0;
    let lossSum = 0;
    for (const [index, batch] of batches.entries()) {
      const learningRate = Array.isArray(rates)
        ? (rates[Math.min(index, rates.length - 1)] ?? TINKER_DEFAULT_LEARNING_RATE)
        : (rates ?? TINKER_DEFAULT_LEARNING_RATE);
      const datums = batch.map(sftDatum);
      const [output, optimizer] = await Promise.all([
        client.forwardBackward(trainingModelId, datums, 'cross_entropy', { signal: options.signal }),
        client.optimStep(trainingModelId, { learningRate }, { signal: options.signal }),
      ]);
      let tokens = 0;
      let batchLoss = 0;
      output.outputs.forEach((datumOutput, datumIndex) => {
        const weights = (datums[datumIndex] as TinkerDatum).weights ?? [];
        datumOutput.logprobs.forEach((logprob, position) => {
          const weight = weights[position] ?? 0;
          if (weight === 0) return;
          tokens += weight;
          batchLoss += -logprob * weight;
        });
      });
      totalTokens += tokens;
      lossSum += batchLoss;
      metrics = {
        loss: tokens > 0 ? batchLoss / tokens : 0,
        learning_rate: learningRate,
        ...optimizerMetrics(optimizer),
        num_trajectories: batch.length,
        num_trainable_tokens: tokens,
        batch_index: index,
        num_batches: batches.length,
        ...serverMetrics(output.metrics),
      };
      options.onEvent({ type: 'gradient_step', data: metrics });
    }
    return {
      ...metrics,
      mean_loss: totalTokens > 0 ? lossSum / totalTokens : 0,
      num_trainable_tokens_total: totalTokens,
    };
  }

  /** Deletes a checkpoint's sampler weights and saved state on the server (404s count as deleted). */
  async deleteCheckpoint(checkpointPath: string): Promise<void> {
    const record = await readTinkerCheckpoint(checkpointPath);
    this.records.delete(checkpointPath);
    const sampler = record.samplerPath.replace(
      /^tinker:\/\/([^/]+)\/(?!sampler_weights\/)/,
      'tinker://$1/sampler_weights/',
    );
    this.samplers.delete(record.samplerPath);
    await Promise.all([
      this.options.client.deleteCheckpoint(sampler),
      record.statePath === null ? false : this.options.client.deleteCheckpoint(record.statePath),
    ]);
  }

  /**
   * Unloads the training models this engine created, freeing the server's adapter slots (their
   * saved state stays: a later run resumes from it, and sampling an old checkpoint saves its
   * sampler weights again from it), and forgets the sampling sessions; the client is closed by
   * its owner.
   */
  async close(): Promise<void> {
    this.closed = true;
    const reloaded = await Promise.all([...this.reloaded.values()].map((entry) => entry.catch(() => undefined)));
    const ids = [
      ...[...this.models.values()].map((model) => model.id),
      ...reloaded.flatMap((entry) => (entry ? [entry.trainingModelId] : [])),
    ];
    this.models.clear();
    this.reloaded.clear();
    this.samplers.clear();
    const client = this.options.client;
    await Promise.all(
      ids.map((id) => client.unloadModel(id, { signal: AbortSignal.timeout(30_000) }).catch(() => undefined)),
    );
  }
}

/** The RL loss sent to the server: the job's `loss_fn` (`ppo`, `cispo`), else `importance_sampling`. */
function lossFunctionOf(config: ExperimentalTrainingConfig | null): string {
  return config?.loss_fn ?? 'importance_sampling';
}

/** A learned sequence as a datum: inputs are the tokens but the last, targets the tokens but the first. */
function rlDatum(sequence: TrainingSequence): TinkerDatum {
  const targets = sequence.tokens.slice(1);
  return {
    inputTokens: sequence.tokens.slice(0, -1),
    targetTokens: targets,
    logprobs: targets.map((_, index) => (sequence.mask[index + 1] === 1 ? (sequence.oldLogprobs[index + 1] ?? 0) : 0)),
    advantages: targets.map((_, index) => (sequence.mask[index + 1] === 1 ? (sequence.weights[index + 1] ?? 0) : 0)),
  };
}

function sftDatum(sequence: TrainingSequence): TinkerDatum {
  const targets = sequence.tokens.slice(1);
  return {
    inputTokens: sequence.tokens.slice(0, -1),
    targetTokens: targets,
    weights: targets.map((_, index) => sequence.mask[index + 1] ?? 0),
  };
}

/** `grad_norm` and the like from an optimizer step's metrics (`skyrl.ai/grad_norm` → `grad_norm`). */
function optimizerMetrics(metrics: Record<string, number>): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [name, value] of Object.entries(metrics)) {
    const short = name.slice(name.lastIndexOf('/') + 1).replaceAll(':', '_');
    if (short === 'learning_rate') continue; // the rate asked for is reported; the server's is float32
    result[short] = value;
  }
  return result;
}

/** The server's forward/backward metrics under `server_<name>` (`loss:sum` → `server_loss_sum`). */
function serverMetrics(metrics: Record<string, number>): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [name, value] of Object.entries(metrics))
    result[`server_${name.slice(name.lastIndexOf('/') + 1).replaceAll(':', '_')}`] = value;
  return result;
}

/**
 * A sampled sequence as the text layer shapes choices: the end-of-turn token is kept in the
 * tokens (a trainer learns to stop) and left out of the text; a stop string of the request ends
 * the text and drops the tokens from the one that reached it.
 */
function sampledText(sequence: TinkerSequence, text: TextLayer, stops: readonly string[]): SampledText {
  const stopIds = new Set(text.stopTokenIds);
  let tokens = sequence.tokens;
  let logprobs = sequence.logprobs.length === tokens.length ? sequence.logprobs : tokens.map(() => Number.NaN);
  const last = tokens[tokens.length - 1];
  const endsOnStopToken = last !== undefined && stopIds.has(last);
  const body = endsOnStopToken ? tokens.slice(0, -1) : tokens;
  let decoded = text.decode(body, { skipSpecialTokens: true });
  let finishReason: 'stop' | 'length' = endsOnStopToken || sequence.stopReason === 'stop' ? 'stop' : 'length';
  const hits = stops.map((stop) => decoded.indexOf(stop)).filter((index) => index >= 0);
  if (hits.length > 0) {
    const cut = Math.min(...hits);
    let keep = 0;
    while (keep < body.length && text.decode(body.slice(0, keep + 1), { skipSpecialTokens: true }).length <= cut)
      keep += 1;
    tokens = body.slice(0, keep);
    logprobs = logprobs.slice(0, keep);
    decoded = decoded.slice(0, cut);
    finishReason = 'stop';
  }
  return { tokens, logprobs, alternatives: tokens.map(() => []), text: decoded, finishReason };
}

/**
 * The local policy engine: batched sampling on the calling thread, training on a worker thread.
 */
import type { Tensor } from '@tensorflow/tfjs-core';
import type { ChatCompletionRequestBody, ChatCompletionResult, Choice } from '../schema/index.js';
import { loadTensorFlow } from './backend.js';
import type { TensorFlow } from './backend.js';
import { renderPrompt } from './chat-template.js';
import { buildChoice } from './completion.js';
import { MODEL_CONFIGS, tokenizerOf } from './model-config.js';
import type { ModelConfig } from './model-config.js';
import { SeededRandom } from './random.js';
import { generate } from './sampler.js';
import type { GenerationRow, HostEmbeddings } from './sampler.js';
import { loadPolicyWeights, runTrainingJob } from './trainer.js';
import { TrainingThread } from './training-thread.js';
import { EngineInputError } from './types.js';
import type { Engine, EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult, PolicyRef } from './types.js';

/** Options of {@link createEngine}. */
export interface EngineOptions {
  /**
   * Run training jobs on a worker thread (true) or on the calling thread (false: simpler to debug,
   * but completions wait while a job computes).
   * @default true
   */
  readonly workers?: boolean;
  /**
   * How many policies' weights stay loaded for sampling (least recently used are dropped).
   * @default 4
   */
  readonly cacheSize?: number;
  /**
   * Most sequences sampled in one batch (a request with `n` choices counts `n`).
   * @default 128
   */
  readonly maxBatchSequences?: number;
  /**
   * How long the first request of a batch waits for others to join it, in milliseconds.
   * @default 2
   */
  readonly batchWindowMs?: number;
}

interface LoadedPolicy {
  readonly config: ModelConfig;
  readonly parameters: Record<string, Tensor>;
  readonly embeddings: HostEmbeddings;
}

interface PendingRequest {
  readonly policy: PolicyRef;
  readonly request: ChatCompletionRequestBody;
  readonly prompt: number[];
  readonly rows: GenerationRow[];
  readonly random: SeededRandom;
  readonly resolve: (result: ChatCompletionResult) => void;
  readonly reject: (error: Error) => void;
  settled: boolean;
}

function abortError(): Error {
  const error = new Error('The chat completion was aborted.');
  error.name = 'AbortError';
  return error;
}

class LocalEngine implements Engine {
  private readonly cache = new Map<string, Promise<LoadedPolicy>>();
  private readonly queue: PendingRequest[] = [];
  private draining = false;
  /** The drain loop in progress, if any (close waits for it before freeing weights). */
  private drainRun: Promise<void> | null = null;
  /** Requests of the batch being sampled now. */
  private running: readonly PendingRequest[] = [];
  private closed = false;
  private readonly trainingThread: TrainingThread | null;
  private trainingChain: Promise<unknown> = Promise.resolve();
  private readonly cacheSize: number;
  private readonly maxBatchSequences: number;
  private readonly batchWindowMs: number;

  constructor(
    private readonly tf: TensorFlow,
    options: EngineOptions,
  ) {
    this.trainingThread = options.workers === false ? null : new TrainingThread();
    this.cacheSize = Math.max(1, options.cacheSize ?? 4);
    this.maxBatchSequences = Math.max(1, options.maxBatchSequences ?? 128);
    this.batchWindowMs = Math.max(0, options.batchWindowMs ?? 2);
  }

  baseModels(): readonly string[] {
    return [...MODEL_CONFIGS.keys()];
  }

  chatCompletion(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    options: { readonly signal?: AbortSignal } = {},
  ): Promise<ChatCompletionResult> {
    if (this.closed) return Promise.reject(new Error('The engine is closed.'));
    const config = MODEL_CONFIGS.get(policy.baseModel);
    if (!config)
      return Promise.reject(
        new EngineInputError(
          `Unknown base model ${JSON.stringify(policy.baseModel)}: expected one of ${this.baseModels().join(', ')}.`,
          ['body', 'model'],
        ),
      );
    let prompt: number[];
    try {
      prompt = renderPrompt(request.messages, request.tools, tokenizerOf(config));
    } catch (error) {
      return Promise.reject(error);
    }
    if (prompt.length >= config.contextLength) {
      return Promise.reject(
        new EngineInputError(
          `The prompt is ${prompt.length} tokens long, but ${config.id} has a context of ${config.contextLength} tokens (prompt and completion together): shorten the messages or tools.`,
          ['body', 'messages'],
        ),
      );
    }
    const room = config.contextLength - prompt.length;
    const maxTokens = Math.min(room, request.max_completion_tokens ?? request.max_tokens ?? room);
    const n = request.n ?? 1;
    const stop =
      request.stop === null || request.stop === undefined
        ? []
        : typeof request.stop === 'string'
          ? [request.stop]
          : request.stop;
    const topLogprobs = request.logprobs ? (request.top_logprobs ?? 0) : 0;
    const seed = request.seed;
    const random = new SeededRandom(seed ?? Math.floor(Math.random() * 2 ** 32));
    const signal = options.signal;
    return new Promise<ChatCompletionResult>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError());
        return;
      }
      const pending: PendingRequest = {
        policy,
        request,
        prompt,
        random,
        rows: [],
        resolve: (result) => {
          if (pending.settled) return;
          pending.settled = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(result);
        },
        reject: (error) => {
          if (pending.settled) return;
          pending.settled = true;
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
        settled: false,
      };
      const onAbort = (): void => pending.reject(abortError());
      signal?.addEventListener('abort', onAbort, { once: true });
      for (let index = 0; index < n; index += 1) {
        pending.rows.push({
          prompt,
          sampling: {
            temperature: request.temperature ?? 1,
            topP: request.top_p ?? 1,
            maxTokens,
            stop,
            topLogprobs,
            random: new SeededRandom(random.int()),
          },
          isCancelled: () => pending.settled,
        });
      }
      this.queue.push(pending);
      this.scheduleDrain();
    });
  }

  private scheduleDrain(): void {
    if (this.draining) return;
    this.draining = true;
    setTimeout(() => {
      this.drainRun = this.drain();
    }, this.batchWindowMs);
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const first = this.queue[0] as PendingRequest;
        const batch: PendingRequest[] = [];
        let sequences = 0;
        for (let index = 0; index < this.queue.length; ) {
          const pending = this.queue[index] as PendingRequest;
          const fits = batch.length === 0 || sequences + pending.rows.length <= this.maxBatchSequences;
          if (pending.policy.key === first.policy.key && fits) {
            batch.push(pending);
            sequences += pending.rows.length;
            this.queue.splice(index, 1);
          } else {
            index += 1;
          }
        }
        await this.runBatch(batch.filter((pending) => !pending.settled));
      }
    } finally {
      this.drainRun = null;
      this.draining = false;
      if (this.queue.length > 0 && !this.closed) this.scheduleDrain();
    }
  }

  private async runBatch(batch: PendingRequest[]): Promise<void> {
    const first = batch[0];
    if (!first) return;
    this.running = batch;
    try {
      const loaded = await this.load(first.policy);
      const rows = batch.flatMap((pending) => pending.rows);
      const sequences = await generate(this.tf, loaded.config, loaded.parameters, loaded.embeddings, rows);
      let offset = 0;
      for (const pending of batch) {
        const mine = sequences.slice(offset, offset + pending.rows.length);
        offset += pending.rows.length;
        const tools = pending.request.tools ?? [];
        const customToolNames = new Set(tools.flatMap((tool) => (tool.type === 'custom' ? [tool.custom.name] : [])));
        const makeId = (): string =>
          `call_${pending.random.int().toString(16).padStart(8, '0')}${pending.random.int().toString(16).padStart(8, '0')}`;
        const choices: Choice[] = mine.map((sequence, index) =>
          buildChoice(sequence, index, {
            logprobs: pending.request.logprobs === true,
            tokensAsIds: pending.request.return_tokens_as_token_ids === true,
            parseTools: tools.length > 0 && pending.request.tool_choice !== 'none',
            customToolNames,
            makeId,
            tokenizer: tokenizerOf(loaded.config),
          }),
        );
        const completionTokens = mine.reduce((sum, sequence) => sum + sequence.sampledCount, 0);
        pending.resolve({
          choices,
          usage: {
            prompt_tokens: pending.prompt.length,
            completion_tokens: completionTokens,
            total_tokens: pending.prompt.length + completionTokens,
          },
        });
      }
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      for (const pending of batch) pending.reject(failure);
    } finally {
      this.running = [];
    }
  }

  private load(policy: PolicyRef): Promise<LoadedPolicy> {
    const cached = this.cache.get(policy.key);
    if (cached) {
      // Re-insert: the Map's order is the recency order of the LRU.
      this.cache.delete(policy.key);
      this.cache.set(policy.key, cached);
      return cached;
    }
    const loading = (async (): Promise<LoadedPolicy> => {
      const config = MODEL_CONFIGS.get(policy.baseModel);
      if (!config)
        throw new EngineInputError(`Unknown base model ${JSON.stringify(policy.baseModel)}.`, ['body', 'model']);
      let weights;
      try {
        weights = await loadPolicyWeights(config, policy.checkpointPath);
      } catch (error) {
        throw new Error(
          `Could not load the weights of ${policy.key} from ${policy.checkpointPath ?? 'the base model'}: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      const parameters: Record<string, Tensor> = {};
      for (const [name, tensor] of weights) parameters[name] = this.tf.tensor(tensor.data, [...tensor.shape]);
      const embeddings = {
        token: (weights.get('token_embedding') as { data: Float32Array }).data,
        position: (weights.get('position_embedding') as { data: Float32Array }).data,
      };
      return { config, parameters, embeddings };
    })();
    loading.catch(() => this.cache.delete(policy.key));
    this.cache.set(policy.key, loading);
    // Batches run one at a time and load before they start, so an evicted entry is never in use.
    while (this.cache.size > this.cacheSize) {
      const [oldestKey, oldest] = this.cache.entries().next().value as [string, Promise<LoadedPolicy>];
      this.cache.delete(oldestKey);
      void oldest
        .then((entry) => Object.values(entry.parameters).forEach((tensor) => tensor.dispose()))
        .catch(() => undefined);
    }
    return loading;
  }

  train(
    job: EngineTrainingJob,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal },
  ): Promise<EngineTrainingResult> {
    if (this.closed) return Promise.reject(new Error('The engine is closed.'));
    const run = async (): Promise<EngineTrainingResult> => {
      if (options.signal?.aborted) throw new Error('The training job was cancelled before it started.');
      if (this.trainingThread) return this.trainingThread.run(job, options.onEvent, options.signal);
      return runTrainingJob(job, { onEvent: options.onEvent, isCancelled: () => options.signal?.aborted === true });
    };
    // One job at a time: jobs of one model build on each other's checkpoints.
    const result = this.trainingChain.then(run, run);
    this.trainingChain = result.catch(() => undefined);
    return result;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const pending of this.queue.splice(0))
      pending.reject(new Error('The engine was closed before the completion ran.'));
    // A settled request's rows stop at the next decoding step, so the batch in flight ends soon;
    // its weights must not be freed under it.
    for (const pending of this.running) pending.reject(new Error('The engine was closed while the completion ran.'));
    await this.drainRun;
    await this.trainingThread?.close();
    for (const loading of this.cache.values()) {
      try {
        const entry = await loading;
        for (const tensor of Object.values(entry.parameters)) tensor.dispose();
      } catch {
        // A failed load holds no tensors.
      }
    }
    this.cache.clear();
  }
}

/**
 * Creates the local policy engine (loads tfjs with the wasm backend on first use).
 *
 * @example
 * const engine = await createEngine();
 * const policy = { baseModel: 'policyloop/tiny-chat', checkpointPath: null, key: 'policyloop/tiny-chat' };
 * const result = await engine.chatCompletion(policy, { model: policy.baseModel, messages: [{ role: 'user', content: 'hi' }], logprobs: true });
 * await engine.close();
 */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const tf = await loadTensorFlow();
  return new LocalEngine(tf, options);
}

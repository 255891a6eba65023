/**
 * The local policy engine: batched sampling on the calling thread, training on a worker thread.
 */
import type { Tensor } from '@tensorflow/tfjs-core';
import type { ChatCompletionRequestBody, ChatCompletionResult, Choice } from '../schema/index.js';
import { loadTensorFlow } from './backend.js';
import type { TensorFlow } from './tensorflow.js';
import { renderPrompt } from './chat-template.js';
import { buildChoice } from './completion.js';
import { buildHfChoice } from '../text/choice.js';
import { disposeLora, readAdapter, uploadLora } from './hf/lora.js';
import { runnable } from './hf/model.js';
import type { LoraTensors, RunnableModel } from './hf/model.js';
import { ModelRegistry } from './hf/registry.js';
import { HfBaseCache } from './hf/runtime.js';
import type { HfBaseModel } from './hf/runtime.js';
import { generateHf } from './hf/sampler.js';
import { loadDefaultTextLayer } from '../text/loader.js';
import type { TextLayerLoader } from '../text/loader.js';
import { runHfTrainingJob } from './hf/trainer.js';
import { promptTokens } from '../text/prompt.js';
import { MODEL_CONFIGS, tokenizerOf } from './model-config.js';
import type { ModelConfig } from './model-config.js';
import { SeededRandom } from './random.js';
import { generate } from './sampler.js';
import type { GenerationRow, HostEmbeddings } from './sampler.js';
import { loadPolicyWeights, runTrainingJob } from './trainer.js';
import { TrainingThread } from './training-thread.js';
import { completionUsage, EngineInputError } from './types.js';
import type {
  Engine,
  EngineRuntimeInfo,
  EngineTrainingEvent,
  EngineTrainingJob,
  EngineTrainingResult,
  PolicyRef,
} from './types.js';
import { engineRuntime } from './onnx/onnx-runtime.js';
import type { EngineRuntimeName } from './onnx/onnx-runtime.js';
import { OnnxHfModel, generateHfOnnx, onnxLora } from './onnx/onnx-sampler.js';
import type { OnnxLora } from './onnx/onnx-sampler.js';

/** Options of {@link createEngine}. */
export interface EngineOptions {
  /**
   * Run training jobs on a worker thread (true) or on the calling thread (false: simpler to debug,
   * but completions wait while a job computes).
   * @default true
   */
  readonly workers?: boolean | undefined;
  /**
   * How many policies' weights stay loaded for sampling (least recently used are dropped).
   * @default 4
   */
  readonly cacheSize?: number | undefined;
  /**
   * Most sequences sampled in one batch (a request with `n` choices counts `n`).
   * @default 128
   */
  readonly maxBatchSequences?: number | undefined;
  /**
   * How long the first request of a batch waits for others to join it, in milliseconds.
   * @default 2
   */
  readonly batchWindowMs?: number | undefined;
  /**
   * Hugging Face model folders to serve besides those found in the Hugging Face cache (each
   * folder's id is `org/name` when it lies in a cache layout, else its absolute path).
   * @default []
   */
  readonly models?: readonly string[] | undefined;
  /** Environment read for the Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME`). @default process.env */
  readonly env?: NodeJS.ProcessEnv | undefined;
  /**
   * Loads a model folder's text layer (tokenizer and chat template). Used on this thread only:
   * a training worker always uses the default. @default the `src/engine/hf/text-layer.ts` loader
   */
  readonly textLayer?: TextLayerLoader | undefined;
  /**
   * What Hugging Face models sample and train on: `onnxruntime` (native kernels on every core;
   * rejects when onnxruntime-node cannot load) or `tfjs-wasm` (one thread, the fallback). The
   * built-in models run on tfjs-wasm either way.
   * @default `POLICYLOOP_ENGINE_RUNTIME`, else onnxruntime when it loads, else tfjs-wasm
   */
  readonly runtime?: EngineRuntimeName | undefined;
}

type LoadedPolicy =
  | {
      readonly kind: 'builtin';
      readonly config: ModelConfig;
      readonly parameters: Record<string, Tensor>;
      readonly embeddings: HostEmbeddings;
    }
  | {
      readonly kind: 'hf';
      readonly base: HfBaseModel;
      readonly model: RunnableModel;
      /** The adapter as tfjs tensors (tfjs-wasm sampling). */
      readonly lora: LoraTensors | null;
      /** The adapter as onnxruntime inputs (onnxruntime sampling). */
      readonly onnxLora: OnnxLora | null;
    };

function disposePolicy(entry: LoadedPolicy): void {
  if (entry.kind === 'builtin') for (const tensor of Object.values(entry.parameters)) tensor.dispose();
  else if (entry.lora) disposeLora(entry.lora);
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
  private readonly registry: ModelRegistry;
  private readonly loadText: TextLayerLoader;
  private readonly bases: HfBaseCache;
  /** Base models wrapped for onnxruntime, by base (onnxruntime sampling only). */
  private readonly onnxModels = new Map<HfBaseModel, Promise<OnnxHfModel>>();

  constructor(
    private readonly tf: TensorFlow,
    options: EngineOptions,
    private readonly runtimeInfo: EngineRuntimeInfo,
  ) {
    // onnxruntime reads the weights from host memory: none of them need a copy in the wasm heap.
    this.bases = new HfBaseCache(runtimeInfo.name === 'onnxruntime' ? 'onnx-sampling' : 'sampling');
    this.trainingThread = options.workers === false ? null : new TrainingThread();
    this.cacheSize = Math.max(1, options.cacheSize ?? 4);
    this.maxBatchSequences = Math.max(1, options.maxBatchSequences ?? 128);
    this.batchWindowMs = Math.max(0, options.batchWindowMs ?? 2);
    // An injected text layer (tests) brings its own tokenizer: then folders need no text files.
    this.registry = new ModelRegistry(options.models ?? [], options.env ?? process.env, {
      textFiles: options.textLayer === undefined,
    });
    this.loadText = options.textLayer ?? loadDefaultTextLayer;
  }

  runtime(): EngineRuntimeInfo {
    return this.runtimeInfo;
  }

  /** A base model wrapped for onnxruntime, once. */
  private onnxModel(base: HfBaseModel): Promise<OnnxHfModel> {
    let model = this.onnxModels.get(base);
    if (!model) {
      model = OnnxHfModel.create(base.config, base.base);
      model.catch(() => this.onnxModels.delete(base));
      this.onnxModels.set(base, model);
    }
    return model;
  }

  baseModels(): readonly string[] {
    return [...MODEL_CONFIGS.keys(), ...this.registry.models().keys()];
  }

  describeMissingBaseModel(id: string): string {
    return this.registry.describeMissing(id);
  }

  /** The folder of a Hugging Face base model, or an EngineInputError saying where it was looked for. */
  private hfDirectory(baseModel: string): string {
    const directory = this.registry.resolve(baseModel);
    if (!directory) throw new EngineInputError(this.registry.describeMissing(baseModel), ['body', 'model']);
    return directory;
  }

  /**
   * The shared base model of a Hugging Face policy. What its folder holds (weights that contradict
   * config.json, a tokenizer its library cannot read, a model too large for the heap) is the
   * request's model's problem, not the service's: an EngineInputError naming the folder.
   */
  private async loadBase(baseModel: string): Promise<HfBaseModel> {
    const directory = this.hfDirectory(baseModel);
    try {
      return await this.bases.load(this.tf, directory, this.loadText);
    } catch (error) {
      if (error instanceof EngineInputError) throw error;
      throw new EngineInputError(
        `Base model ${JSON.stringify(baseModel)} cannot be loaded from the folder ${directory}: ${error instanceof Error ? error.message : String(error)}`,
        ['body', 'model'],
      );
    }
  }

  private async hfPrompt(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
  ): Promise<{ prompt: number[]; contextLength: number }> {
    const base = await this.loadBase(policy.baseModel);
    for (const message of request.messages) {
      const content = (message as { content?: unknown }).content;
      if (
        Array.isArray(content) &&
        content.some((part) => !['text', 'refusal'].includes((part as { type?: string }).type ?? ''))
      )
        throw new EngineInputError('The engine is text only: image, audio and file parts are not supported.', [
          'body',
          'messages',
        ]);
    }
    return {
      prompt: promptTokens(base.text, request.messages, request.tools, request.chat_template_kwargs),
      contextLength: base.config.contextLength,
    };
  }

  chatCompletion(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    options: { readonly signal?: AbortSignal | undefined } = {},
  ): Promise<ChatCompletionResult> {
    if (this.closed) return Promise.reject(new Error('The engine is closed.'));
    const config = MODEL_CONFIGS.get(policy.baseModel);
    if (!config)
      return this.hfPrompt(policy, request).then(({ prompt, contextLength }) =>
        this.enqueue(policy, request, prompt, contextLength, options),
      );
    let prompt: number[];
    try {
      prompt = renderPrompt(request.messages, request.tools, tokenizerOf(config));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.enqueue(policy, request, prompt, config.contextLength, options);
  }

  private enqueue(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    prompt: number[],
    contextLength: number,
    options: { readonly signal?: AbortSignal | undefined },
  ): Promise<ChatCompletionResult> {
    if (this.closed) return Promise.reject(new Error('The engine is closed.'));
    if (prompt.length >= contextLength) {
      return Promise.reject(
        new EngineInputError(
          `The prompt is ${prompt.length} tokens long, but ${policy.baseModel} has a context of ${contextLength} tokens (prompt and completion together): shorten the messages or tools.`,
          ['body', 'messages'],
        ),
      );
    }
    const room = contextLength - prompt.length;
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
      const sequences =
        loaded.kind === 'builtin'
          ? await generate(this.tf, loaded.config, loaded.parameters, loaded.embeddings, rows)
          : this.runtimeInfo.name === 'onnxruntime'
            ? await generateHfOnnx(await this.onnxModel(loaded.base), loaded.onnxLora, loaded.base.text, rows)
            : await generateHf(this.tf, loaded.model, loaded.base.text, rows);
      let offset = 0;
      for (const pending of batch) {
        const mine = sequences.slice(offset, offset + pending.rows.length);
        offset += pending.rows.length;
        const tools = pending.request.tools ?? [];
        const customToolNames = new Set(tools.flatMap((tool) => (tool.type === 'custom' ? [tool.custom.name] : [])));
        const makeId = (): string =>
          `call_${pending.random.int().toString(16).padStart(8, '0')}${pending.random.int().toString(16).padStart(8, '0')}`;
        const shape = {
          logprobs: pending.request.logprobs === true,
          tokensAsIds: pending.request.return_tokens_as_token_ids === true,
          parseTools: tools.length > 0 && pending.request.tool_choice !== 'none',
          makeId,
        };
        // A prompt rendered with the request's template variables cannot be rendered again from
        // the messages alone: such choices carry their token ids, which training then uses.
        const templated = Object.keys(pending.request.chat_template_kwargs ?? {}).length > 0;
        const choices: Choice[] = mine.map((sequence, index) =>
          loaded.kind === 'builtin'
            ? buildChoice(sequence, index, { ...shape, customToolNames, tokenizer: tokenizerOf(loaded.config) })
            : templated
              ? ({
                  ...buildHfChoice(sequence, index, { ...shape, text: loaded.base.text, tools }),
                  prompt_token_ids: pending.prompt,
                  token_ids: [...sequence.tokens],
                } as Choice)
              : buildHfChoice(sequence, index, { ...shape, text: loaded.base.text, tools }),
        );
        const completionTokens = mine.reduce((sum, sequence) => sum + sequence.sampledCount, 0);
        pending.resolve({
          choices,
          usage: completionUsage(pending.prompt.length, completionTokens),
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
      if (!config) return this.loadHf(policy);
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
      return { kind: 'builtin', config, parameters, embeddings };
    })();
    loading.catch(() => this.cache.delete(policy.key));
    this.cache.set(policy.key, loading);
    // Batches run one at a time and load before they start, so an evicted entry is never in use.
    while (this.cache.size > this.cacheSize) {
      const [oldestKey, oldest] = this.cache.entries().next().value as [string, Promise<LoadedPolicy>];
      this.cache.delete(oldestKey);
      void oldest.then(disposePolicy).catch(() => undefined);
    }
    return loading;
  }

  /** A Hugging Face policy: the shared base model plus the checkpoint's adapter, if any. */
  private async loadHf(policy: PolicyRef): Promise<LoadedPolicy> {
    const base = await this.loadBase(policy.baseModel);
    let lora: LoraTensors | null = null;
    let adapterOnnx: OnnxLora | null = null;
    if (policy.checkpointPath) {
      let adapter;
      try {
        adapter = await readAdapter(policy.checkpointPath, base.config);
      } catch (error) {
        throw new Error(
          `Could not load the adapter of ${policy.key} from ${policy.checkpointPath}: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      if (this.runtimeInfo.name === 'onnxruntime')
        adapterOnnx = await onnxLora(base.config, adapter.settings, adapter.weights);
      else lora = uploadLora(this.tf, base.config, adapter.settings, adapter.weights);
    }
    return { kind: 'hf', base, model: runnable(base.config, base.base, lora), lora, onnxLora: adapterOnnx };
  }

  train(
    job: EngineTrainingJob,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<EngineTrainingResult> {
    if (this.closed) return Promise.reject(new Error('The engine is closed.'));
    // Training runs on the engine's runtime, as its sampling does.
    job = { ...job, runtime: this.runtimeInfo.name };
    const run = async (): Promise<EngineTrainingResult> => {
      if (options.signal?.aborted) throw new Error('The training job was cancelled before it started.');
      const directory = MODEL_CONFIGS.has(job.policy.baseModel) ? null : this.registry.resolve(job.policy.baseModel);
      if (!MODEL_CONFIGS.has(job.policy.baseModel) && !directory)
        throw new Error(this.registry.describeMissing(job.policy.baseModel));
      if (this.trainingThread) return this.trainingThread.run(job, options.onEvent, options.signal, directory);
      const hooks = { onEvent: options.onEvent, isCancelled: () => options.signal?.aborted === true };
      if (directory) return runHfTrainingJob(this.tf, job, hooks, directory, this.loadText, this.bases);
      return runTrainingJob(job, hooks);
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
        disposePolicy(await loading);
      } catch {
        // A failed load holds no tensors.
      }
    }
    this.cache.clear();
    for (const model of this.onnxModels.values()) {
      try {
        await (await model).release();
      } catch {
        // A model that failed to wrap holds no session.
      }
    }
    this.onnxModels.clear();
    await this.bases.unload();
  }
}

/**
 * Creates the local policy engine (loads tfjs with the wasm backend, and onnxruntime-node when the
 * runtime is onnxruntime: see {@link EngineOptions.runtime}).
 *
 * @example
 * const engine = await createEngine();
 * const policy = { baseModel: 'policyloop/tiny-chat', checkpointPath: null, key: 'policyloop/tiny-chat' };
 * const result = await engine.chatCompletion(policy, { model: policy.baseModel, messages: [{ role: 'user', content: 'hi' }], logprobs: true });
 * await engine.close();
 */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const runtime = await engineRuntime(options.runtime);
  const tf = await loadTensorFlow();
  return new LocalEngine(tf, options, runtime);
}

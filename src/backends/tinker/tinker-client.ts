/**
 * A client of the Tinker training API (Thinking Machines' protocol, also served by SkyRL and other
 * LoRA engines): sessions with heartbeats, training models, forward/backward, optimizer steps,
 * weights for the sampler, sampling, and checkpoints. Every mutating call answers a future that
 * is followed with `retrieve_future` until it resolves. The wire is JSON, except the
 * forward/backward request and the sample and forward/backward results, which are protobuf.
 */
import { randomUUID } from 'node:crypto';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { APIConnectionError, APIConnectionTimeoutError, APIError } from '../../client/errors.js';
import { retryDelay } from '../../client/retry-delay.js';
import { delay } from '../../internal/delay.js';
import { userAbortError } from '../../internal/errors.js';
import {
  DType,
  ForwardBackwardOutputSchema,
  ForwardBackwardRequestSchema,
  SampleResponseSchema,
  StopReason,
} from './proto/tinker_public_pb.js';
import type { ForwardBackwardOutput, SampleResponse } from './proto/tinker_public_pb.js';
import { TinkerFutureTimeoutError, TinkerRequestFailedError } from './errors.js';
import { float32Bytes, int32Bytes, int64Bytes, readFloat32, readInt32, readInt64 } from './tensors.js';

/** The SDK version this client speaks as (the server may check it). */
export const TINKER_SDK_VERSION = '0.25.0';
const PROTO = 'application/x-protobuf';
const HEARTBEAT_MS = 10_000;
/** How long one `retrieve_future` long-poll may take (the SDK's 45 s, plus room for the answer). */
const POLL_TIMEOUT_MS = 60_000;

/** Options of {@link TinkerClient}. */
export interface TinkerClientOptions {
  /** The server, without `/api/v1` (e.g. `http://127.0.0.1:8000`). */
  readonly baseURL: string;
  /** The key, sent as `X-API-Key`. */
  readonly apiKey: string;
  /** `fetch` to use. @default globalThis.fetch */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /** Time allowed for one HTTP request that is not a long poll, in milliseconds. @default 60_000 */
  readonly timeout?: number | undefined;
  /** Time allowed for one future, from submission to result, in milliseconds. @default 900_000 */
  readonly futureTimeout?: number | undefined;
  /** Retries of a request that got no answer, a 5xx or a 429. @default 4 */
  readonly maxRetries?: number | undefined;
  /** First wait before a retry, in milliseconds (doubling after, at most 8 s). @default 500 */
  readonly retryDelay?: number | undefined;
}

/** LoRA settings of a training model. */
export interface LoraSettings {
  readonly rank: number;
  readonly seed?: number | undefined;
  readonly trainMlp?: boolean | undefined;
  readonly trainAttn?: boolean | undefined;
  readonly trainUnembed?: boolean | undefined;
}

/** One training example: the model's input tokens and the loss function's per-token inputs. */
export interface TinkerDatum {
  /** Input token ids (the sequence without its last token). */
  readonly inputTokens: readonly number[];
  /** Next-token targets, one per input token. */
  readonly targetTokens: readonly number[];
  /** `cross_entropy`: weight of each target (0 for prompt tokens). */
  readonly weights?: readonly number[] | undefined;
  /** RL losses: the sampler's logprob of each target (0 where not learned). */
  readonly logprobs?: readonly number[] | undefined;
  /** RL losses: the advantage of each target (0 where not learned). */
  readonly advantages?: readonly number[] | undefined;
}

/** What one datum's forward (or forward/backward) gave back. */
export interface TinkerDatumOutput {
  /** The model's logprob of each target token. */
  readonly logprobs: number[];
  /** The loss of each target token, when the server gives it. */
  readonly elementwiseLoss: number[] | undefined;
}

/** A forward/backward result. */
export interface ForwardBackwardResult {
  readonly outputs: TinkerDatumOutput[];
  /** The server's metrics (hosted Tinker: `loss:sum`; SkyRL: none), combined over the chunks as the SDK does. */
  readonly metrics: Record<string, number>;
}

/** Adam settings of one optimizer step. */
export interface AdamParams {
  readonly learningRate: number;
  readonly beta1?: number | undefined;
  readonly beta2?: number | undefined;
  readonly eps?: number | undefined;
  readonly weightDecay?: number | undefined;
  readonly gradClipNorm?: number | undefined;
}

/** What a sampling request asks for. */
export interface SampleParams {
  readonly promptTokens: readonly number[];
  readonly numSamples: number;
  readonly maxTokens: number;
  readonly temperature?: number | undefined;
  readonly topP?: number | undefined;
  readonly topK?: number | undefined;
  readonly seed?: number | undefined;
  /** Stop strings (the server stops at the first; it may keep them in the tokens). */
  readonly stop?: readonly string[] | undefined;
  /** Stop token ids (end-of-turn tokens). */
  readonly stopTokens?: readonly number[] | undefined;
  /** Ask for the logprob of every prompt token (the reference checks use it). */
  readonly promptLogprobs?: boolean | undefined;
}

/** One sampled sequence. */
export interface TinkerSequence {
  readonly tokens: number[];
  /** The sampler's logprob of each token (empty when the server sent none). */
  readonly logprobs: number[];
  readonly stopReason: 'stop' | 'length';
}

/** A sampling result. */
export interface TinkerSampleResult {
  readonly sequences: TinkerSequence[];
  /** Logprobs of the prompt tokens, when asked (SkyRL gives n-1 values for n tokens, hosted Tinker n with a leading null). */
  readonly promptLogprobs: number[] | undefined;
}

/** A checkpoint on the server. */
export interface TinkerCheckpoint {
  readonly checkpointId: string;
  readonly checkpointType: string;
  readonly tinkerPath: string;
  readonly time: string | null;
}

interface SubmitOptions {
  readonly signal?: AbortSignal | undefined;
}

type Body = { readonly json: unknown } | { readonly protobuf: Uint8Array };

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * The Tinker API over HTTP. One client holds one session (opened by {@link TinkerClient.open},
 * kept alive by a heartbeat every 10 s, ended by {@link TinkerClient.close}).
 * @example
 * const tinker = new TinkerClient({ baseURL: 'http://127.0.0.1:8000', apiKey: 'tml-local' });
 * await tinker.open();
 * const modelId = await tinker.createModel('Qwen/Qwen3-8B', { rank: 32 });
 * await tinker.close();
 */
export class TinkerClient {
  /** The server's API root, ending in `/api/v1`. */
  readonly apiURL: string;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly timeout: number;
  private readonly futureTimeout: number;
  private readonly maxRetries: number;
  private readonly firstRetryDelay: number;
  private sessionId: string | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private modelSeq = 0;
  private samplingSeq = 0;
  private readonly seqIds = new Map<string, number>();
  /** Training calls of a model are submitted one after another, in `seq_id` order. */
  private readonly submitChains = new Map<string, Promise<unknown>>();
  private flags: Record<string, unknown> = {};
  private readonly closing = new AbortController();
  /** zstd compression of forward/backward bodies, when the server asks for it and Node has it. */
  private zstd: ((bytes: Uint8Array) => Uint8Array) | undefined;
  /** The last heartbeat failure, kept to explain a later failure. */
  lastHeartbeatError: Error | undefined;

  constructor(private readonly options: TinkerClientOptions) {
    this.apiURL = `${options.baseURL.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}/api/v1`;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.timeout = options.timeout ?? 60_000;
    this.futureTimeout = options.futureTimeout ?? 900_000;
    this.maxRetries = options.maxRetries ?? 4;
    this.firstRetryDelay = options.retryDelay ?? 500;
  }

  /** The server's feature flags from `client/config` (after {@link open}). */
  get config(): Readonly<Record<string, unknown>> {
    return this.flags;
  }

  /** Reads the server's flags and opens a session with a heartbeat. Safe to call once. */
  async open(options: SubmitOptions = {}): Promise<void> {
    if (this.sessionId !== undefined) return;
    const config = await this.json('POST', 'client/config', { sdk_version: TINKER_SDK_VERSION }, options);
    this.flags = config !== null && typeof config === 'object' ? (config as Record<string, unknown>) : {};
    if (this.flags['proto_compress_fwdbwd'] === true) {
      const zlib = (await import('node:zlib')) as { zstdCompressSync?: (bytes: Uint8Array) => Uint8Array };
      const compress = zlib.zstdCompressSync;
      if (typeof compress === 'function') this.zstd = (bytes) => new Uint8Array(compress(bytes));
      else
        process.emitWarning(
          'The Tinker server asks for zstd-compressed forward_backward bodies (proto_compress_fwdbwd), but this Node has no zlib zstd (Node 22.15+ or 24): sending them uncompressed.',
          { code: 'POLICYLOOP_TINKER_NO_ZSTD' },
        );
    }
    const session = (await this.json(
      'POST',
      'create_session',
      { tags: ['policyloop'], user_metadata: {}, sdk_version: TINKER_SDK_VERSION, type: 'create_session' },
      options,
    )) as { session_id?: unknown };
    const id = stringOrUndefined(session.session_id);
    if (id === undefined)
      throw new APIConnectionError({ message: 'Tinker create_session answered without a session_id.' });
    this.sessionId = id;
    this.heartbeat = setInterval(() => {
      this.json(
        'POST',
        'session_heartbeat',
        { session_id: id, type: 'session_heartbeat' },
        {
          signal: this.closing.signal,
          retries: 0,
        },
      ).then(
        () => {
          this.lastHeartbeatError = undefined;
        },
        (error: unknown) => {
          this.lastHeartbeatError = error instanceof Error ? error : new Error(String(error));
        },
      );
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** The open session's id. */
  get session(): string {
    if (this.sessionId === undefined) throw new Error('The Tinker session is not open: call open() first.');
    return this.sessionId;
  }

  /** The base models the server trains (`get_server_capabilities`). */
  async supportedModels(options: SubmitOptions = {}): Promise<string[]> {
    const answer = (await this.json('GET', 'get_server_capabilities', undefined, options)) as {
      supported_models?: { model_name?: unknown }[];
    };
    return (answer.supported_models ?? []).flatMap((model) =>
      typeof model.model_name === 'string' ? [model.model_name] : [],
    );
  }

  /** Creates a LoRA training model on `baseModel`; resolves with its id once the server made it. */
  async createModel(baseModel: string, lora: LoraSettings, options: SubmitOptions = {}): Promise<string> {
    const body = {
      session_id: this.session,
      model_seq_id: this.modelSeq++,
      base_model: baseModel,
      lora_config: {
        rank: lora.rank,
        seed: lora.seed ?? null,
        train_mlp: lora.trainMlp ?? true,
        train_attn: lora.trainAttn ?? true,
        train_unembed: lora.trainUnembed ?? true,
      },
      type: 'create_model',
    };
    const result = (await this.call('create_model', 'CreateModel', () => ({ json: body }), options)) as {
      model_id?: unknown;
    };
    const id = stringOrUndefined(result.model_id);
    if (id === undefined) throw new Error(`Tinker create_model gave no model_id: ${JSON.stringify(result)}`);
    return id;
  }

  /** Unloads a training model, freeing its adapter slot on the server. */
  async unloadModel(modelId: string, options: SubmitOptions = {}): Promise<void> {
    await this.call(
      'unload_model',
      'UnloadModel',
      () => ({ json: { model_id: modelId, type: 'unload_model' } }),
      options,
    );
  }

  /** Loads a `save_weights` checkpoint (`tinker://…/weights/…`) into a new training model, with its optimizer state. */
  async loadWeights(modelId: string, path: string, options: SubmitOptions = {}): Promise<void> {
    await this.trainingCall(
      modelId,
      'load_weights',
      'LoadWeights',
      (seqId) => ({ json: { model_id: modelId, path, optimizer: true, seq_id: seqId, type: 'load_weights' } }),
      options,
    );
  }

  /**
   * One forward/backward pass over `data` with `lossFn`, in chunks at the server's limits (each
   * chunk its own request; the gradients add up on the server until the next optimizer step).
   * `forwardOnly` computes the outputs without gradients.
   */
  async forwardBackward(
    modelId: string,
    data: readonly TinkerDatum[],
    lossFn: string,
    options: SubmitOptions & { forwardOnly?: boolean; lossFnConfig?: Record<string, number> } = {},
  ): Promise<ForwardBackwardResult> {
    const maxLength = Math.max(1, Number(this.flags['fwdbwd_max_chunk_len'] ?? 1024));
    const maxBytes = Math.max(1, Number(this.flags['fwdbwd_max_chunk_bytes_count'] ?? 5_000_000));
    const chunks: TinkerDatum[][] = [];
    let current: TinkerDatum[] = [];
    let bytes = 0;
    for (const datum of data) {
      // The SDK's estimate: 10 bytes per input token and per value of each loss input it sends.
      const size =
        10 *
        (datum.inputTokens.length +
          datum.targetTokens.length +
          (datum.weights?.length ?? 0) +
          (datum.logprobs?.length ?? 0) +
          (datum.advantages?.length ?? 0));
      if (current.length > 0 && (current.length >= maxLength || bytes + size > maxBytes)) {
        chunks.push(current);
        current = [];
        bytes = 0;
      }
      current.push(datum);
      bytes += size;
    }
    if (current.length > 0) chunks.push(current);
    const zstd = this.zstd;
    const operation = options.forwardOnly ? 'forward' : 'forward_backward';
    // Chunks are submitted in seq_id order at once; their futures resolve in parallel.
    const results = await Promise.all(
      chunks.map((chunk) =>
        this.trainingCall(
          modelId,
          operation,
          options.forwardOnly ? 'Forward' : 'ForwardBackward',
          (seqId) => {
            const message = create(ForwardBackwardRequestSchema, {
              modelId,
              seqId,
              lossFn,
              forwardOnly: options.forwardOnly ?? false,
              lossFnConfig: options.lossFnConfig ?? {},
              data: chunk.map((datum) => ({
                modelInput: [
                  { chunk: { case: 'encodedText' as const, value: { tokens: int32Bytes(datum.inputTokens) } } },
                ],
                lossFnInputs: lossInputs(datum),
              })),
            });
            const encoded = toBinary(ForwardBackwardRequestSchema, message);
            return { protobuf: zstd ? zstd(encoded) : encoded, compressed: zstd !== undefined };
          },
          options,
        ),
      ),
    );
    const outputs: TinkerDatumOutput[] = [];
    const chunkMetrics: { metrics: Record<string, number>; datums: number }[] = [];
    for (const result of results) {
      const decoded = result as ForwardBackwardOutput;
      const before = outputs.length;
      for (const record of decoded.lossFnOutputs) outputs.push(...datumOutputs(record.fields));
      chunkMetrics.push({ metrics: decoded.metrics, datums: outputs.length - before });
    }
    const metrics = combineChunkMetrics(chunkMetrics);
    if (outputs.length !== data.length)
      throw new Error(`Tinker ${operation} returned ${outputs.length} outputs for ${data.length} datums`);
    return { outputs, metrics };
  }

  /** One Adam step over the gradients accumulated since the last; resolves with the server's metrics. */
  async optimStep(modelId: string, adam: AdamParams, options: SubmitOptions = {}): Promise<Record<string, number>> {
    const result = (await this.trainingCall(
      modelId,
      'optim_step',
      'OptimStep',
      (seqId) => ({
        json: {
          model_id: modelId,
          seq_id: seqId,
          adam_params: {
            learning_rate: adam.learningRate,
            beta1: adam.beta1 ?? 0.9,
            beta2: adam.beta2 ?? 0.95,
            eps: adam.eps ?? 1e-12,
            weight_decay: adam.weightDecay ?? 0,
            grad_clip_norm: adam.gradClipNorm ?? 0,
          },
          type: 'optim_step',
        },
      }),
      options,
    )) as { metrics?: Record<string, unknown> };
    return numbersOf(result.metrics ?? {});
  }

  /** Saves the current weights for sampling under `name`; resolves with their `tinker://` path. */
  async saveWeightsForSampler(modelId: string, name: string, options: SubmitOptions = {}): Promise<string> {
    return this.savePath(modelId, 'save_weights_for_sampler', 'SaveWeightsForSampler', name, options);
  }

  /** Saves the weights and optimizer state under `name` (resumable); resolves with the `tinker://` path. */
  async saveWeights(modelId: string, name: string, options: SubmitOptions = {}): Promise<string> {
    return this.savePath(modelId, 'save_weights', 'SaveWeights', name, options);
  }

  private async savePath(
    modelId: string,
    operation: string,
    requestType: string,
    name: string,
    options: SubmitOptions,
  ): Promise<string> {
    const result = (await this.trainingCall(
      modelId,
      operation,
      requestType,
      (seqId) => ({ json: { model_id: modelId, path: name, seq_id: seqId, type: operation } }),
      options,
    )) as { path?: unknown };
    const path = stringOrUndefined(result.path);
    if (path === undefined) throw new Error(`Tinker ${operation} gave no path: ${JSON.stringify(result)}`);
    return path;
  }

  /** Opens a sampling session on a base model or on saved sampler weights (`tinker://…`). */
  async createSamplingSession(source: { baseModel: string } | { modelPath: string }, options: SubmitOptions = {}) {
    const answer = (await this.json(
      'POST',
      'create_sampling_session',
      {
        session_id: this.session,
        sampling_session_seq_id: this.samplingSeq++,
        ...('baseModel' in source ? { base_model: source.baseModel } : { model_path: source.modelPath }),
        type: 'create_sampling_session',
      },
      options,
    )) as { sampling_session_id?: unknown };
    const id = stringOrUndefined(answer.sampling_session_id);
    if (id === undefined) throw new Error('Tinker create_sampling_session answered without a sampling_session_id.');
    return id;
  }

  /** Samples `numSamples` continuations of a token prompt in a sampling session. */
  async sample(
    samplingSessionId: string,
    params: SampleParams,
    options: SubmitOptions = {},
  ): Promise<TinkerSampleResult> {
    const seqId = this.nextSeq(samplingSessionId);
    const body = {
      sampling_session_id: samplingSessionId,
      seq_id: seqId,
      num_samples: params.numSamples,
      prompt: { chunks: [{ tokens: [...params.promptTokens], type: 'encoded_text' }] },
      sampling_params: {
        max_tokens: params.maxTokens,
        seed: params.seed ?? null,
        temperature: params.temperature ?? 1,
        top_k: params.topK ?? -1,
        top_p: params.topP ?? 1,
        stop:
          params.stopTokens && params.stopTokens.length > 0
            ? [...params.stopTokens]
            : params.stop && params.stop.length > 0
              ? [...params.stop]
              : null,
      },
      prompt_logprobs: params.promptLogprobs ?? false,
      topk_prompt_logprobs: 0,
      type: 'sample',
    };
    const result = (await this.call('sample', 'Sample', () => ({ json: body }), options, {
      asample: true,
    })) as SampleResponse;
    return {
      sequences: result.sequences.map((sequence) => ({
        tokens: readInt32(sequence.tokens, 'sampled tokens'),
        logprobs: sequence.logprobs ? readFloat32(sequence.logprobs, 'sampled logprobs') : [],
        stopReason: sequence.stopReason === StopReason.LENGTH ? 'length' : 'stop',
      })),
      promptLogprobs: result.promptLogprobs ? readFloat32(result.promptLogprobs, 'prompt logprobs') : undefined,
    };
  }

  /** The checkpoints of a training model (`GET training_runs/{id}/checkpoints`). */
  async listCheckpoints(modelId: string, options: SubmitOptions = {}): Promise<TinkerCheckpoint[]> {
    const answer = (await this.json(
      'GET',
      `training_runs/${encodeURIComponent(modelId)}/checkpoints`,
      undefined,
      options,
    )) as { checkpoints?: Record<string, unknown>[] };
    return (answer.checkpoints ?? []).map((checkpoint) => ({
      checkpointId: String(checkpoint['checkpoint_id']),
      checkpointType: String(checkpoint['checkpoint_type']),
      tinkerPath: String(checkpoint['tinker_path']),
      time: typeof checkpoint['time'] === 'string' ? checkpoint['time'] : null,
    }));
  }

  /** Deletes a checkpoint by its `tinker://<model>/<kind>/<name>` path (a 404 counts as deleted). */
  async deleteCheckpoint(path: string, options: SubmitOptions = {}): Promise<boolean> {
    const match = /^tinker:\/\/([^/]+)\/((?:weights|sampler_weights)\/[^/]+)$/.exec(path);
    if (!match) throw new Error(`Expected a tinker://<model>/<weights|sampler_weights>/<name> path, got ${path}`);
    try {
      await this.json(
        'DELETE',
        `training_runs/${encodeURIComponent(match[1] as string)}/checkpoints/${match[2] as string}`,
        undefined,
        options,
      );
      return true;
    } catch (error) {
      if (error instanceof APIError && error.status === 404) return false;
      throw error;
    }
  }

  /**
   * Downloads the archive (`.tar.gz`, a PEFT adapter on SkyRL) of sampler weights saved at
   * `tinker://<model>/sampler_weights/<name>`, following the server's redirect.
   */
  async downloadSamplerArchive(path: string, options: SubmitOptions = {}): Promise<Uint8Array> {
    const match = /^tinker:\/\/([^/]+)\/(?:sampler_weights\/)?([^/]+)$/.exec(path);
    if (!match) throw new Error(`Expected a tinker://<model>/sampler_weights/<name> path, got ${path}`);
    const response = await this.send(
      'GET',
      `training_runs/${encodeURIComponent(match[1] as string)}/checkpoints/${encodeURIComponent(match[2] as string)}/archive`,
      undefined,
      { signal: options.signal, accept: 'application/octet-stream' },
    );
    return new Uint8Array(await response.arrayBuffer());
  }

  /** Stops the heartbeat and any request under way. The server frees the session when it times out. */
  async close(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.closing.abort(new Error('The Tinker client was closed.'));
    this.sessionId = undefined;
  }

  // ---- futures ----

  private nextSeq(key: string): number {
    const next = (this.seqIds.get(key) ?? 0) + 1;
    this.seqIds.set(key, next);
    return next;
  }

  /**
   * A training call of one model: its `seq_id` is taken and its request sent only after the
   * model's previous call was accepted, so the server sees them in order; the futures are then
   * followed in parallel.
   */
  private trainingCall(
    modelId: string,
    operation: string,
    requestType: string,
    build: (seqId: number) => Body & { compressed?: boolean },
    options: SubmitOptions,
  ): Promise<unknown> {
    const previous = this.submitChains.get(modelId) ?? Promise.resolve();
    let accepted!: (value: unknown) => void;
    const acceptedPromise = new Promise((resolve) => {
      accepted = resolve;
    });
    this.submitChains.set(modelId, acceptedPromise);
    const seqId = this.nextSeq(modelId);
    const body = build(seqId);
    return this.call(operation, requestType, () => body, options, {
      after: previous.catch(() => undefined),
      onSubmitted: () => accepted(undefined),
    }).finally(() => accepted(undefined));
  }

  /**
   * Submits a mutating request and follows its future: `try_again`, 408 and 5xx poll again; 429
   * backs off; 410 re-submits the request. A failed future throws {@link TinkerRequestFailedError},
   * one that outlives `futureTimeout` throws {@link TinkerFutureTimeoutError}.
   */
  private async call(
    operation: string,
    requestType: string,
    build: () => Body & { compressed?: boolean },
    options: SubmitOptions,
    extra: { after?: Promise<unknown>; onSubmitted?: () => void; asample?: boolean } = {},
  ): Promise<unknown> {
    const deadline = AbortSignal.timeout(this.futureTimeout);
    const signal = AbortSignal.any([deadline, this.closing.signal, ...(options.signal ? [options.signal] : [])]);
    const fail = (error: unknown, requestId: string): never => {
      if (options.signal?.aborted) throw userAbortError(options.signal, `Tinker ${operation}`);
      if (deadline.aborted) throw new TinkerFutureTimeoutError(operation, requestId, this.futureTimeout);
      throw error;
    };
    const idempotencyKey = randomUUID();
    const route = extra.asample ? 'asample' : operation === 'forward' ? 'forward_backward' : operation;
    const submit = async (): Promise<string> => {
      const body = build();
      const answer = (await this.json('POST', route, 'json' in body ? body.json : body.protobuf, {
        signal,
        idempotencyKey,
        protobuf: 'protobuf' in body,
        compressed: body.compressed === true,
      })) as { request_id?: unknown; future_id?: unknown };
      const id = stringOrUndefined(answer.request_id) ?? stringOrUndefined(answer.future_id);
      if (id === undefined)
        throw new Error(`Tinker ${operation} answered without a request_id: ${JSON.stringify(answer)}`);
      return id;
    };
    let requestId = '?';
    try {
      if (extra.after) await extra.after;
      requestId = await submit();
    } catch (error) {
      extra.onSubmitted?.();
      return fail(error, requestId);
    }
    extra.onSubmitted?.();
    const proto = requestType === 'Sample' || requestType === 'ForwardBackward' || requestType === 'Forward';
    let retries = 0;
    for (let iteration = 0; ; iteration += 1) {
      let response: Response;
      try {
        response = await this.send(
          'POST',
          'retrieve_future',
          { json: { request_id: requestId, allow_metadata_only: false } },
          {
            signal,
            timeout: POLL_TIMEOUT_MS,
            accept: proto ? PROTO : 'application/json',
            headers: { 'X-Tinker-Request-Type': requestType, 'X-Tinker-Request-Iteration': String(iteration) },
            raw: true,
          },
        );
      } catch (error) {
        if (signal.aborted) return fail(error, requestId);
        // A long poll that outlived its own timeout (SkyRL holds one up to 300 s): poll again at once.
        if (error instanceof APIConnectionTimeoutError) continue;
        // No answer (connection refused, reset): back off and poll again.
        retries += 1;
        try {
          await delay(retryDelay(retries, undefined, this.firstRetryDelay), signal);
        } catch (abort) {
          return fail(abort, requestId);
        }
        continue;
      }
      const status = response.status;
      if (status === 200) {
        retries = 0;
        const type = response.headers.get('content-type') ?? '';
        if (type.includes(PROTO)) {
          const bytes = new Uint8Array(await response.arrayBuffer());
          return requestType === 'Sample'
            ? fromBinary(SampleResponseSchema, bytes)
            : fromBinary(ForwardBackwardOutputSchema, bytes);
        }
        const result = (await response.json()) as Record<string, unknown>;
        if (result['type'] === 'try_again' || result['status'] === 'complete_metadata') {
          // A server that answers at once instead of long-polling (or a fetch that never touches the
          // network) would otherwise keep this loop on microtasks forever, starving the timers of
          // futureTimeout and of the caller's abort: yield to the event loop before polling again.
          try {
            await delay(0, signal);
          } catch (abort) {
            return fail(abort, requestId);
          }
          continue;
        }
        if ('error' in result && typeof result['error'] === 'string')
          throw new TinkerRequestFailedError(
            operation,
            requestId,
            result['error'],
            stringOrUndefined(result['category']),
          );
        if (proto)
          throw new Error(
            `Tinker ${operation}: expected a protobuf result, got JSON ${JSON.stringify(result).slice(0, 200)}`,
          );
        return result;
      }
      const body = await readBody(response);
      if (status === 408 || status >= 500 || status === 429) {
        retries += 1;
        try {
          await delay(status === 408 ? 0 : retryDelay(retries, response.headers, this.firstRetryDelay), signal);
        } catch (abort) {
          return fail(abort, requestId);
        }
        continue;
      }
      if (status === 410) {
        // The promise expired or broke on the server: send the same request again (after yielding,
        // as for try_again, so that a server answering 410 at once cannot starve the timers).
        try {
          await delay(0, signal);
          requestId = await submit();
        } catch (error) {
          return fail(error, requestId);
        }
        continue;
      }
      if (
        status === 400 &&
        body !== null &&
        typeof body === 'object' &&
        typeof (body as { detail?: unknown }).detail === 'string'
      )
        throw new TinkerRequestFailedError(operation, requestId, (body as { detail: string }).detail);
      throw APIError.generate(status, body, `Tinker retrieve_future for ${operation} failed`, response.headers);
    }
  }

  // ---- HTTP ----

  private async json(
    method: 'GET' | 'POST' | 'DELETE',
    route: string,
    body: unknown,
    options: {
      signal?: AbortSignal | undefined;
      retries?: number;
      idempotencyKey?: string;
      protobuf?: boolean;
      compressed?: boolean;
    },
  ): Promise<unknown> {
    const response = await this.send(
      method,
      route,
      body === undefined ? undefined : options.protobuf ? { protobuf: body as Uint8Array } : { json: body },
      options,
    );
    if (response.status === 204) return {};
    const text = await response.text();
    return text === '' ? {} : (JSON.parse(text) as unknown);
  }

  /**
   * Sends one request, retrying a missing answer, a 5xx or a 429 (a POST only with an idempotency
   * key). Resolves with the response (2xx, or any status when `raw`); throws the `APIError` of
   * other statuses.
   */
  private async send(
    method: 'GET' | 'POST' | 'DELETE',
    route: string,
    body: Body | undefined,
    options: {
      signal?: AbortSignal | undefined;
      retries?: number;
      idempotencyKey?: string;
      compressed?: boolean;
      timeout?: number;
      accept?: string;
      headers?: Record<string, string>;
      raw?: boolean;
    },
  ): Promise<Response> {
    const url = `${this.apiURL}/${route}`;
    const headers: Record<string, string> = {
      'X-API-Key': this.options.apiKey,
      Accept: options.accept ?? 'application/json',
      'User-Agent': `policyloop (Tinker SDK protocol ${TINKER_SDK_VERSION})`,
      ...options.headers,
    };
    let payload: BodyInit | undefined;
    if (body && 'json' in body) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body.json);
    } else if (body) {
      headers['Content-Type'] = PROTO;
      if (options.compressed) headers['Content-Encoding'] = 'zstd';
      payload = body.protobuf as unknown as BodyInit;
    }
    if (options.idempotencyKey) headers['X-Idempotency-Key'] = options.idempotencyKey;
    const retriesAllowed =
      method !== 'POST' || options.idempotencyKey !== undefined ? (options.retries ?? this.maxRetries) : 0;
    const timeout = options.timeout ?? this.timeout;
    for (let attempt = 0; ; attempt += 1) {
      if (options.signal?.aborted) throw userAbortError(options.signal, `Tinker ${route}`);
      const attemptTimeout = AbortSignal.timeout(timeout);
      const signal = options.signal ? AbortSignal.any([options.signal, attemptTimeout]) : attemptTimeout;
      let response: Response;
      try {
        response = await this.fetchImpl(url, { method, headers, body: payload ?? null, signal, redirect: 'follow' });
      } catch (error) {
        if (options.signal?.aborted) throw userAbortError(options.signal, `Tinker ${route}`);
        const failure = attemptTimeout.aborted
          ? new APIConnectionTimeoutError({
              cause: error,
              timeout,
              message: `Tinker ${route} timed out: no response within ${timeout} ms from ${url}.`,
            })
          : new APIConnectionError({
              cause: error,
              message: `Tinker ${route}: no response from ${url} (${error instanceof Error && error.cause instanceof Error ? error.cause.message : isAbort(error) ? 'aborted' : String(error)}). Is the Tinker server running at ${this.options.baseURL}?`,
            });
        if (attempt >= retriesAllowed) throw failure;
        await delay(retryDelay(attempt + 1, undefined, this.firstRetryDelay), options.signal);
        continue;
      }
      if (response.ok || options.raw) return response;
      const retryable = response.status === 429 || response.status >= 500;
      if (retryable && attempt < retriesAllowed) {
        await response.body?.cancel().catch(() => undefined);
        await delay(retryDelay(attempt + 1, response.headers, this.firstRetryDelay), options.signal);
        continue;
      }
      const errorBody = await readBody(response);
      throw APIError.generate(response.status, errorBody, `Tinker ${route} failed`, response.headers);
    }
  }
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text().catch(() => '');
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function numbersOf(values: Record<string, unknown>): Record<string, number> {
  const numbers: Record<string, number> = {};
  for (const [name, value] of Object.entries(values))
    if (typeof value === 'number' && Number.isFinite(value)) numbers[name] = value;
  return numbers;
}

/**
 * The metrics of one forward/backward sent in chunks, combined as the SDK does by the reduction
 * each name ends with: `:mean` weighted by the chunks' datums, `:min`, `:max`; `:sum` and the
 * rest add up.
 */
function combineChunkMetrics(chunks: readonly { metrics: Record<string, number>; datums: number }[]) {
  const combined: Record<string, number> = {};
  const names = new Set(chunks.flatMap((chunk) => Object.keys(chunk.metrics)));
  for (const name of names) {
    const present = chunks.filter((chunk) => name in chunk.metrics);
    const values = present.map((chunk) => chunk.metrics[name] as number);
    const reduction = name.slice(name.lastIndexOf(':') + 1);
    if (name.includes(':') && reduction === 'mean') {
      const datums = present.reduce((total, chunk) => total + chunk.datums, 0);
      combined[name] =
        datums > 0
          ? present.reduce((total, chunk) => total + (chunk.metrics[name] as number) * chunk.datums, 0) / datums
          : values.reduce((total, value) => total + value, 0) / values.length;
    } else if (name.includes(':') && reduction === 'min') combined[name] = Math.min(...values);
    else if (name.includes(':') && reduction === 'max') combined[name] = Math.max(...values);
    else combined[name] = values.reduce((total, value) => total + value, 0);
  }
  return combined;
}

function tensor(values: readonly number[], dtype: DType) {
  return {
    encoding: {
      case: 'dense' as const,
      value: dtype === DType.DTYPE_INT64 ? int64Bytes(values) : float32Bytes(values),
    },
    dtype,
    shape: [BigInt(values.length)],
  };
}

function lossInputs(datum: TinkerDatum) {
  const inputs: Record<string, ReturnType<typeof tensor>> = {
    target_tokens: tensor(datum.targetTokens, DType.DTYPE_INT64),
  };
  if (datum.weights) inputs['weights'] = tensor(datum.weights, DType.DTYPE_FLOAT32);
  if (datum.logprobs) inputs['logprobs'] = tensor(datum.logprobs, DType.DTYPE_FLOAT32);
  if (datum.advantages) inputs['advantages'] = tensor(datum.advantages, DType.DTYPE_FLOAT32);
  return inputs;
}

/** Splits an `ArrayRecord`'s batched fields into one output per datum. */
function datumOutputs(fields: ForwardBackwardOutput['lossFnOutputs'][number]['fields']): TinkerDatumOutput[] {
  const split = (name: string): number[][] | undefined => {
    const field = fields[name];
    if (!field) return undefined;
    if (field.dtype !== DType.DTYPE_FLOAT32 && field.dtype !== DType.DTYPE_UNSPECIFIED)
      throw new Error(`Expected Tinker output ${name} as float32, got dtype ${field.dtype}`);
    const offsets = readInt64(field.offsets, `${name} offsets`);
    const rows: number[][] = [];
    for (let index = 0; index + 1 < offsets.length; index += 1)
      rows.push(readFloat32(field.data.subarray(offsets[index], offsets[index + 1]), name));
    return rows;
  };
  const logprobs = split('logprobs');
  if (!logprobs) throw new Error('Tinker forward_backward output has no logprobs field');
  const losses = split('elementwise_loss');
  return logprobs.map((row, index) => ({ logprobs: row, elementwiseLoss: losses?.[index] }));
}

/**
 * A client of the Tinker training API (Thinking Machines' protocol, also served by SkyRL and other
 * LoRA engines): sessions with heartbeats, training models, forward/backward, optimizer steps,
 * weights for the sampler, sampling, and checkpoints. Every mutating call answers a future that
 * is followed with `retrieve_future` until it resolves. The wire is JSON, except the
 * forward/backward request and the sample and forward/backward results, which are protobuf.
 *
 * Its pieces follow the SDK's: this service client holds the session (`session.ts`, the SDK's
 * `InternalClientHolder`, over the transport of `http.ts`) and creates training models; the
 * training calls (`training-client.ts`), the sampling calls (`sampling-client.ts`) and the REST
 * calls on checkpoints (`rest-client.ts`) are its parts, each mutating call followed by a
 * `TinkerFuture` (`future.ts`).
 */
import { TinkerHttp, stringOrUndefined } from './http.js';
import type { HttpSettings } from './http.js';
import { TinkerRestClient } from './rest-client.js';
import { TinkerSamplingClient } from './sampling-client.js';
import { TinkerSession } from './session.js';
import { TinkerTrainingClient } from './training-client.js';
import type {
  AdamParams,
  ForwardBackwardResult,
  LoraSettings,
  SampleParams,
  SubmitOptions,
  TinkerCheckpoint,
  TinkerDatum,
  TinkerSampleResult,
  TinkerTrainingRun,
} from './types.js';

export { TINKER_SDK_VERSION } from './http.js';
export type {
  AdamParams,
  ForwardBackwardResult,
  LoraSettings,
  SampleParams,
  TinkerCheckpoint,
  TinkerDatum,
  TinkerDatumOutput,
  TinkerSampleResult,
  TinkerSequence,
  TinkerTrainingRun,
} from './types.js';

/** Options of {@link TinkerClient}: the transport's, and the time a future may take. */
export interface TinkerClientOptions extends HttpSettings {
  /** Time allowed for one future, from submission to result, in milliseconds. @default 900_000 */
  readonly futureTimeout?: number | undefined;
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
  private readonly holder: TinkerSession;
  private readonly training: TinkerTrainingClient;
  private readonly sampling: TinkerSamplingClient;
  private readonly rest: TinkerRestClient;

  /** @param options The server, its key, and the client's limits. */
  constructor(options: TinkerClientOptions) {
    const http = new TinkerHttp(options);
    this.apiURL = http.apiURL;
    this.holder = new TinkerSession(http, options.futureTimeout ?? 900_000);
    this.training = new TinkerTrainingClient(this.holder);
    this.sampling = new TinkerSamplingClient(this.holder);
    this.rest = new TinkerRestClient(http);
  }

  /** The server's feature flags from `client/config` (after {@link open}). */
  get config(): Readonly<Record<string, unknown>> {
    return this.holder.flags;
  }

  /** The last heartbeat failure, kept to explain a later failure. */
  get lastHeartbeatError(): Error | undefined {
    return this.holder.lastHeartbeatError;
  }

  /** Reads the server's flags and opens a session with a heartbeat. Safe to call once. */
  async open(options: SubmitOptions = {}): Promise<void> {
    await this.holder.open(options);
  }

  /** The open session's id. */
  get session(): string {
    return this.holder.id;
  }

  /** The base models the server trains (`get_server_capabilities`). */
  async supportedModels(options: SubmitOptions = {}): Promise<string[]> {
    const answer = (await this.holder.http.json('GET', 'get_server_capabilities', undefined, options)) as {
      supported_models?: { model_name?: unknown }[];
    };
    return (answer.supported_models ?? []).flatMap((model) =>
      typeof model.model_name === 'string' ? [model.model_name] : [],
    );
  }

  /** Creates a LoRA training model on `baseModel`; resolves with its id once the server made it. */
  async createModel(baseModel: string, lora: LoraSettings, options: SubmitOptions = {}): Promise<string> {
    const body = {
      session_id: this.holder.id,
      model_seq_id: this.holder.nextModelSeq(),
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
    const result = (await this.holder.call(
      { operation: 'create_model', requestType: 'CreateModel', build: () => ({ json: body }) },
      options,
    )) as { model_id?: unknown };
    const id = stringOrUndefined(result.model_id);
    if (id === undefined) throw new Error(`Tinker create_model gave no model_id: ${JSON.stringify(result)}`);
    return id;
  }

  /** Unloads a training model, freeing its adapter slot on the server. */
  unloadModel(modelId: string, options: SubmitOptions = {}): Promise<void> {
    return this.training.unloadModel(modelId, options);
  }

  /** Loads a `save_weights` checkpoint (`tinker://…/weights/…`) into a new training model, with its optimizer state. */
  loadWeights(modelId: string, path: string, options: SubmitOptions = {}): Promise<void> {
    return this.training.loadWeights(modelId, path, options);
  }

  /**
   * One forward/backward pass over `data` with `lossFn`, in chunks at the server's limits (each
   * chunk its own request; the gradients add up on the server until the next optimizer step).
   * `forwardOnly` computes the outputs without gradients.
   */
  forwardBackward(
    modelId: string,
    data: readonly TinkerDatum[],
    lossFn: string,
    options: SubmitOptions & { forwardOnly?: boolean; lossFnConfig?: Record<string, number> } = {},
  ): Promise<ForwardBackwardResult> {
    return this.training.forwardBackward(modelId, data, lossFn, options);
  }

  /** One Adam step over the gradients accumulated since the last; resolves with the server's metrics. */
  optimStep(modelId: string, adam: AdamParams, options: SubmitOptions = {}): Promise<Record<string, number>> {
    return this.training.optimStep(modelId, adam, options);
  }

  /** Saves the current weights for sampling under `name`; resolves with their `tinker://` path. */
  saveWeightsForSampler(modelId: string, name: string, options: SubmitOptions = {}): Promise<string> {
    return this.training.saveWeightsForSampler(modelId, name, options);
  }

  /** Saves the weights and optimizer state under `name` (resumable); resolves with the `tinker://` path. */
  saveWeights(modelId: string, name: string, options: SubmitOptions = {}): Promise<string> {
    return this.training.saveWeights(modelId, name, options);
  }

  /** Opens a sampling session on a base model or on saved sampler weights (`tinker://…`). */
  createSamplingSession(
    source: { baseModel: string } | { modelPath: string },
    options: SubmitOptions = {},
  ): Promise<string> {
    return this.sampling.createSamplingSession(source, options);
  }

  /** Samples `numSamples` continuations of a token prompt in a sampling session. */
  sample(samplingSessionId: string, params: SampleParams, options: SubmitOptions = {}): Promise<TinkerSampleResult> {
    return this.sampling.sample(samplingSessionId, params, options);
  }

  /** Every training run the server keeps for this key (`GET training_runs`, all pages). */
  listTrainingRuns(options: SubmitOptions = {}): Promise<TinkerTrainingRun[]> {
    return this.rest.listTrainingRuns(options);
  }

  /** The checkpoints of a training model (`GET training_runs/{id}/checkpoints`). */
  listCheckpoints(modelId: string, options: SubmitOptions = {}): Promise<TinkerCheckpoint[]> {
    return this.rest.listCheckpoints(modelId, options);
  }

  /** Deletes a checkpoint by its `tinker://<model>/<kind>/<name>` path (a 404 counts as deleted). */
  deleteCheckpoint(path: string, options: SubmitOptions = {}): Promise<boolean> {
    return this.rest.deleteCheckpoint(path, options);
  }

  /**
   * Downloads the archive (`.tar.gz`, a PEFT adapter on SkyRL) of sampler weights saved at
   * `tinker://<model>/sampler_weights/<name>`, following the server's redirect.
   */
  downloadSamplerArchive(path: string, options: SubmitOptions = {}): Promise<Uint8Array> {
    return this.rest.downloadSamplerArchive(path, options);
  }

  /** Stops the heartbeat and any request under way. The server frees the session when it times out. */
  async close(): Promise<void> {
    this.holder.close();
  }
}

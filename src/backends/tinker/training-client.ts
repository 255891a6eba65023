/**
 * The training calls of the Tinker API (what the SDK's `TrainingClient` does for one model, here
 * for every model of a session by its id): forward/backward, optimizer steps, saving and loading
 * weights, unloading. A model's calls carry a `seq_id` and are submitted strictly in order; their
 * futures are followed in parallel.
 */
import type { ForwardBackwardOutput } from './proto/tinker_public_pb.js';
import { chunksOf, combineResults, encodeForwardBackward } from './forward-backward.js';
import { stringOrUndefined } from './http.js';
import type { Body } from './http.js';
import type { TinkerSession } from './session.js';
import type { AdamParams, ForwardBackwardResult, SubmitOptions, TinkerDatum } from './types.js';

/** The finite numbers of a metrics object. */
function numbersOf(values: Record<string, unknown>): Record<string, number> {
  const numbers: Record<string, number> = {};
  for (const [name, value] of Object.entries(values))
    if (typeof value === 'number' && Number.isFinite(value)) numbers[name] = value;
  return numbers;
}

/**
 * The training models of one session.
 * @example
 * const training = new TinkerTrainingClient(session);
 * const metrics = await training.optimStep(modelId, { learningRate: 1e-4 });
 */
export class TinkerTrainingClient {
  private readonly seqIds = new Map<string, number>();
  /** Training calls of a model are submitted one after another, in `seq_id` order. */
  private readonly submitChains = new Map<string, Promise<unknown>>();

  /** @param session The session the models live in. */
  constructor(private readonly session: TinkerSession) {}

  /** Unloads a training model, freeing its adapter slot on the server. */
  async unloadModel(modelId: string, options: SubmitOptions = {}): Promise<void> {
    await this.session.call(
      {
        operation: 'unload_model',
        requestType: 'UnloadModel',
        build: () => ({ json: { model_id: modelId, type: 'unload_model' } }),
      },
      options,
    );
  }

  /** Loads a `save_weights` checkpoint (`tinker://…/weights/…`) into a new training model, with its optimizer state. */
  async loadWeights(modelId: string, path: string, options: SubmitOptions = {}): Promise<void> {
    await this.call(
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
    const zstd = this.session.zstd;
    const operation = options.forwardOnly ? 'forward' : 'forward_backward';
    // Chunks are submitted in seq_id order at once; their futures resolve in parallel.
    const results = await Promise.all(
      chunksOf(data, this.session.flags).map((chunk) =>
        this.call(
          modelId,
          operation,
          options.forwardOnly ? 'Forward' : 'ForwardBackward',
          (seqId) => {
            const encoded = encodeForwardBackward(
              {
                modelId,
                seqId,
                lossFn,
                forwardOnly: options.forwardOnly ?? false,
                lossFnConfig: options.lossFnConfig ?? {},
              },
              chunk,
            );
            return { protobuf: zstd ? zstd(encoded) : encoded, compressed: zstd !== undefined };
          },
          options,
        ),
      ),
    );
    return combineResults(results as ForwardBackwardOutput[], data.length, operation);
  }

  /** One Adam step over the gradients accumulated since the last; resolves with the server's metrics. */
  async optimStep(modelId: string, adam: AdamParams, options: SubmitOptions = {}): Promise<Record<string, number>> {
    const result = (await this.call(
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

  /** A save call; resolves with the `tinker://` path the server gave. */
  private async savePath(
    modelId: string,
    operation: string,
    requestType: string,
    name: string,
    options: SubmitOptions,
  ): Promise<string> {
    const result = (await this.call(
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

  /**
   * A training call of one model: its `seq_id` is taken and its request sent only after the
   * model's previous call was accepted, so the server sees them in order; the futures are then
   * followed in parallel.
   */
  private call(
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
    const seqId = (this.seqIds.get(modelId) ?? 0) + 1;
    this.seqIds.set(modelId, seqId);
    const body = build(seqId);
    return this.session
      .call(
        {
          operation,
          requestType,
          build: () => body,
          after: previous.catch(() => undefined),
          onSubmitted: () => accepted(undefined),
        },
        options,
      )
      .finally(() => accepted(undefined));
  }
}

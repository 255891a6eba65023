/**
 * The sampling side of the Tinker engine: one sampling session per policy's weights (a base
 * model, or a checkpoint's sampler weights), opened once and shared. When the server lost what a
 * session stood on (it restarted, or unloaded the training model behind a checkpoint), the
 * checkpoint's saved state is loaded into a new training model, its sampler weights are saved
 * again, and the sample is tried once more in a new session.
 */
import { randomUUID } from 'node:crypto';
import { APIError } from '../../client/errors.js';
import type { PolicyRef } from '../../engine/types.js';
import type { CheckpointRecords } from './checkpoint-record.js';
import { TinkerRequestFailedError } from './errors.js';
import { targetLogprobs } from './kl-penalty.js';
import type { TinkerClient } from './tinker-client.js';
import type { SampleParams, TinkerSampleResult } from './types.js';

/** A checkpoint's sampler weights saved again from its state, and the training model that holds them. */
interface Reloaded {
  readonly trainingModelId: string;
  readonly samplerPath: string;
}

/**
 * Whether the server lost what a request named: a session or model it no longer has (404), or,
 * after a restart, a training model that is no longer loaded (SkyRL: 400 "Model … not loaded").
 */
function isGone(error: unknown): boolean {
  if (error instanceof APIError) return error.status === 404;
  return error instanceof TinkerRequestFailedError && /not found|not loaded/i.test(error.message);
}

/**
 * The sampling sessions of an engine.
 * @example
 * const sessions = new SamplingSessions(client, records);
 * const result = await sessions.sample({ baseModel: 'Qwen/Qwen3-8B', checkpointPath: null }, params, {});
 */
export class SamplingSessions {
  private readonly samplers = new Map<string, Promise<string>>();
  /** Checkpoints whose sampler weights were saved again from their state (their training model was gone). */
  private readonly reloaded = new Map<string, Promise<Reloaded>>();

  /**
   * @param client The engine's open client.
   * @param records The engine's checkpoint records.
   */
  constructor(
    private readonly client: TinkerClient,
    private readonly records: CheckpointRecords,
  ) {}

  /** Samples `params` from a policy's weights, reloading them once when the server lost them. */
  async sample(
    policy: PolicyRef,
    params: SampleParams,
    options: { readonly signal?: AbortSignal | undefined },
  ): Promise<TinkerSampleResult> {
    try {
      return await this.client.sample(await this.samplerOf(policy, options.signal), params, options);
    } catch (error) {
      if (!isGone(error)) throw error;
      // The session, or the training model behind a checkpoint's sampler weights, is gone (the
      // server restarted, or the model was unloaded): load the checkpoint's state into a new
      // model and save its sampler weights again, then open a new session, once.
      if (policy.checkpointPath !== null) await this.reload(policy.checkpointPath, options.signal);
      return await this.client.sample(await this.samplerOf(policy, options.signal, true), params, options);
    }
  }

  /**
   * The logprob of each token of `tokens` after the ones before it (`tokens.length − 1` values)
   * under a policy's weights, as the SDK's `compute_logprobs` asks the sampler: one sample of one
   * token with the prompt's logprobs. The KL penalty's reference pass.
   * @example
   * const reference = await sessions.computeLogprobs({ baseModel, checkpointPath: null }, [...prompt, ...completion], {});
   */
  async computeLogprobs(
    policy: PolicyRef,
    tokens: readonly number[],
    options: { readonly signal?: AbortSignal | undefined },
  ): Promise<number[]> {
    const result = await this.sample(
      policy,
      { promptTokens: tokens, numSamples: 1, maxTokens: 1, promptLogprobs: true },
      options,
    );
    return targetLogprobs(tokens, result.promptLogprobs);
  }

  /** Forgets the session of a checkpoint's sampler weights (they are being deleted). */
  forget(samplerPath: string): void {
    this.samplers.delete(samplerPath);
  }

  /**
   * Forgets every session, once the reloads under way settled; resolves with the ids of the
   * training models the reloads made, for the caller to unload.
   */
  async close(): Promise<string[]> {
    const reloaded = await Promise.all([...this.reloaded.values()].map((entry) => entry.catch(() => undefined)));
    this.reloaded.clear();
    this.samplers.clear();
    return reloaded.flatMap((entry) => (entry ? [entry.trainingModelId] : []));
  }

  /** The sampling session of a policy's weights (the base model's, or a checkpoint's sampler weights). */
  private async samplerOf(policy: PolicyRef, signal: AbortSignal | undefined, fresh = false): Promise<string> {
    const source =
      policy.checkpointPath === null
        ? { baseModel: policy.baseModel }
        : {
            modelPath:
              (await this.reloaded.get(policy.checkpointPath)?.catch(() => undefined))?.samplerPath ??
              (await this.records.get(policy.checkpointPath)).samplerPath,
          };
    const key = 'baseModel' in source ? `base:${source.baseModel}` : source.modelPath;
    if (fresh) this.samplers.delete(key);
    let session = this.samplers.get(key);
    if (!session) {
      session = this.client.createSamplingSession(source, { signal });
      session.catch(() => this.samplers.delete(key));
      this.samplers.set(key, session);
    }
    return session;
  }

  /** Saves a checkpoint's sampler weights again, from its saved state, in a new training model (once at a time). */
  private reload(checkpointPath: string, signal: AbortSignal | undefined): Promise<Reloaded> {
    const known = this.reloaded.get(checkpointPath);
    const reloading = (async () => {
      const previous = await known?.catch(() => undefined);
      const record = await this.records.get(checkpointPath);
      if (record.statePath === null)
        throw new Error(
          `The Tinker server no longer has the sampler weights of ${checkpointPath}, and that checkpoint has no saved state to load them from (resumableState: false).`,
        );
      const client = this.client;
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
}

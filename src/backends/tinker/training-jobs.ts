/**
 * The training side of the Tinker engine: each model of the service trains in a training model on
 * the server (the one used last when it still holds the job's starting checkpoint, else a new one
 * loaded with that checkpoint's saved state). A job is sent as token ids and per-token loss inputs
 * (forward/backward, then an optimizer step, per batch), its weights are saved for the sampler and
 * as resumable state, and its checkpoint record is written.
 */
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { buildHfRlData, buildHfSftSequences } from '../../engine/hf/training-data.js';
import type { TrainingSequence } from '../../engine/training-data.js';
import type { EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult, PolicyRef } from '../../engine/types.js';
import type { TextLayer } from '../../text/loader.js';
import { writeTinkerCheckpoint } from './checkpoint-record.js';
import type { CheckpointRecords, TinkerCheckpointRecord } from './checkpoint-record.js';
import { TINKER_DEFAULT_LEARNING_RATE } from './defaults.js';
import { TinkerRequestFailedError } from './errors.js';
import { foldKlPenalty, klPenaltySettings } from './kl-penalty.js';
import { tinkerLossConfig, tinkerLossFunction } from './loss.js';
import type { KlPenaltySettings } from './kl-penalty.js';
import type { TinkerClient } from './tinker-client.js';
import type { LoraSettings, TinkerDatum } from './types.js';

export { tinkerLossConfig, tinkerLossFunction };

/** Rows per SFT batch when `batch_size` is `"auto"`, null or absent. */
const AUTO_SFT_BATCH_SIZE = 16;

/** Reference logprob requests of one KL penalty pass in flight at once. */
const REFERENCE_CONCURRENCY = 8;

/**
 * The logprob of each token of `tokens` after the ones before it (`tokens.length − 1` values)
 * under a policy's weights: the KL penalty's reference pass (`SamplingSessions.computeLogprobs`).
 */
export type ReferenceLogprobs = (
  policy: PolicyRef,
  tokens: readonly number[],
  options: { readonly signal?: AbortSignal | undefined },
) => Promise<number[]>;

/** What a job reports to and is stopped by. */
interface JobOptions {
  readonly onEvent: (event: EngineTrainingEvent) => void;
  readonly signal?: AbortSignal | undefined;
}

/** What {@link TinkerTrainingJobs} needs. */
export interface TrainingJobsSettings {
  readonly client: TinkerClient;
  /** The server's base URL, recorded in checkpoints. */
  readonly server: string;
  /** LoRA settings of the training models made for models without a checkpoint. */
  readonly lora: LoraSettings;
  /** Save each step's resumable state besides its sampler weights. @default true */
  readonly resumableState?: boolean | undefined;
  readonly records: CheckpointRecords;
  /**
   * Asks a reference policy's sampler for the logprobs of a sequence (the KL penalty); without it
   * a job with `kl_penalty_coef` fails.
   */
  readonly referenceLogprobs?: ReferenceLogprobs | undefined;
}

/** The KL penalty of one RL job: its settings, and the reference's logprobs of a sequence. */
interface KlReferencePass {
  readonly settings: KlPenaltySettings;
  /** The reference policy (the base model, or a checkpoint with its sampler weights). */
  readonly policy: PolicyRef;
  readonly logprobs: (tokens: readonly number[], signal: AbortSignal | undefined) => Promise<number[]>;
}

/** A server's training model and what it holds. */
interface TrainingModel {
  readonly id: string;
  /** The checkpoint directory whose weights the server's model holds now (null: fresh). */
  checkpointPath: string | null;
}

/**
 * The training models of an engine and the jobs run on them.
 * @example
 * const jobs = new TinkerTrainingJobs({ client, server, lora: { rank: 32 }, records });
 * const { metrics } = await jobs.run(job, text, { onEvent: console.log });
 */
export class TinkerTrainingJobs {
  private readonly models = new Map<string, TrainingModel>();

  /** @param settings The client, the server's address, the LoRA settings and the checkpoint records. */
  constructor(private readonly settings: TrainingJobsSettings) {}

  /** Runs an RL or SFT job on the server and writes the checkpoint record. */
  async run(job: EngineTrainingJob, text: TextLayer, options: JobOptions): Promise<EngineTrainingResult> {
    const modelId = job.modelId ?? path.basename(path.dirname(job.outputPath));
    const signal = options.signal;
    let model: TrainingModel;
    try {
      model = await this.trainingModel(modelId, job.policy.baseModel, job.policy.checkpointPath, signal);
    } catch (error) {
      this.models.delete(modelId);
      throw error;
    }
    const client = this.settings.client;
    let metrics: Record<string, number>;
    try {
      metrics =
        job.kind === 'rl'
          ? await trainRl(client, job, text, model.id, options, await this.klReferencePass(job))
          : await trainSft(client, job, text, model.id, options);
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
        this.settings.resumableState === false ? null : client.saveWeights(model.id, `state-${name}`, { signal }),
      ]);
    } catch (error) {
      this.forget(modelId);
      throw error;
    }
    const record: TinkerCheckpointRecord = {
      server: this.settings.server,
      baseModel: job.policy.baseModel,
      trainingModelId: model.id,
      samplerPath,
      statePath,
      step: job.step,
      lora:
        job.policy.checkpointPath === null
          ? this.settings.lora
          : (await this.settings.records.get(job.policy.checkpointPath)).lora,
    };
    await writeTinkerCheckpoint(job.outputPath, record);
    model.checkpointPath = job.outputPath;
    return { metrics };
  }

  /**
   * The KL penalty's reference pass of an RL job, or undefined without `kl_penalty_coef`: the
   * reference the service resolved (`job.klReference`: a step's checkpoint, or null for the base
   * model), else `kl_ref_adapter_path`, which must be a checkpoint folder of a Tinker-backed model
   * on the same base model (a PEFT adapter folder cannot be loaded by a Tinker sampler).
   */
  private async klReferencePass(job: Extract<EngineTrainingJob, { kind: 'rl' }>): Promise<KlReferencePass | undefined> {
    const settings = klPenaltySettings(job.config);
    if (settings === undefined) return undefined;
    const compute = this.settings.referenceLogprobs;
    if (compute === undefined) throw new Error('This Tinker engine has no reference sampler for the KL penalty.');
    const adapter = job.config?.kl_ref_adapter_path ?? null;
    const named =
      job.klReference !== undefined ? job.klReference.checkpointPath : adapter === null ? null : path.resolve(adapter);
    if (named !== null) {
      let record;
      try {
        record = await this.settings.records.get(named);
      } catch (error) {
        throw new Error(
          `The KL reference ${named} is not a checkpoint of a Tinker-backed model (it has no tinker.json): a Tinker server samples only its own sampler weights, not a PEFT adapter folder. Name a step of this model (kl_penalty_reference_step, kl_penalty_step_lag) or a checkpoint folder it trained.`,
          { cause: error },
        );
      }
      if (record.baseModel !== job.policy.baseModel)
        throw new Error(
          `The KL reference ${named} was trained on ${JSON.stringify(record.baseModel)}, not on this model's base model ${JSON.stringify(job.policy.baseModel)}.`,
        );
    }
    const policy: PolicyRef = { ...job.policy, checkpointPath: named };
    return { settings, policy, logprobs: (tokens, signal) => compute(policy, tokens, { signal }) };
  }

  /** Forgets every training model; returns their ids, for the caller to unload. */
  close(): string[] {
    const ids = [...this.models.values()].map((model) => model.id);
    this.models.clear();
    return ids;
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
    const client = this.settings.client;
    // The server holds few adapters at once: free the one this model held (best effort).
    if (known) void client.unloadModel(known.id).catch(() => undefined);
    this.models.delete(modelId);
    const record = checkpointPath === null ? null : await this.settings.records.get(checkpointPath);
    const lora = record?.lora ?? this.settings.lora;
    let id: string;
    try {
      id = await client.createModel(baseModel, lora, { signal });
    } catch (error) {
      throw loraRefusal(error, lora, this.settings.server) ?? error;
    }
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
      void this.settings.client.unloadModel(known.id, { signal: AbortSignal.timeout(30_000) }).catch(() => undefined);
  }
}

/**
 * A server's refusal to create a training model of this rank, or one more adapter, as an error
 * that names what to change (`lora.rank` of `TinkerBackend`; closing other backends), with the
 * server's own words; undefined for any other failure. SkyRL 0.4.0 says "LoRA rank 32 must be
 * between 1 and 16" and "Maximum number of LoRA adapters (4) reached"; a server that states its
 * limits elsewhere is met the same way.
 */
function loraRefusal(error: unknown, lora: LoraSettings, server: string): Error | undefined {
  if (!(error instanceof TinkerRequestFailedError) || !error.refusedRequest) return undefined;
  const said = error.serverMessage;
  if (/\brank\b/i.test(said)) {
    const most = /between 1 and (\d+)/.exec(said)?.[1];
    return new Error(
      `The Tinker server at ${server} cannot hold a LoRA adapter of rank ${lora.rank}: "${said}". Set \`lora.rank\` of TinkerBackend to ${most === undefined ? 'a rank it holds' : `at most ${most}`} (new TinkerBackend({ lora: { rank: ${most ?? 16} } })); a checkpoint trained at rank ${lora.rank} keeps that rank.`,
      { cause: error },
    );
  }
  if (/adapters?\b/i.test(said) && /maximum|max|reached|no (free|available)/i.test(said))
    return new Error(
      `The Tinker server at ${server} holds no more LoRA adapters: "${said}". Close the backends (or other scripts) that keep training models loaded there, or start the server with more adapters (SkyRL's \`max_lora_adapters\`).`,
      { cause: error },
    );
  return undefined;
}

/**
 * One RL step: the learned sequences' forward/backward with the job's loss (the KL penalty, when
 * on, folded into their advantages first), then one optimizer step.
 */
async function trainRl(
  client: TinkerClient,
  job: Extract<EngineTrainingJob, { kind: 'rl' }>,
  text: TextLayer,
  trainingModelId: string,
  options: JobOptions,
  kl: KlReferencePass | undefined,
): Promise<Record<string, number>> {
  const data = buildHfRlData(job.trajectoryGroups, job.config, text);
  const sequences = data.sequences.filter((sequence) => sequence.mask.includes(1));
  if (sequences.length === 0)
    throw new Error(
      `Nothing to train: ${data.groupsSubmitted} group(s), ${data.groupsTrainable} with different rewards, and no learned token among them.`,
    );
  options.onEvent({ type: 'training_started', data: { num_sequences: 1 } });
  const lossFn = tinkerLossFunction(job.config);
  const lossFnConfig = tinkerLossConfig(lossFn, job.config);
  let datums = sequences.map(rlDatum);
  let klMetrics: Record<string, number> = {};
  if (kl !== undefined) {
    const penalty = await klPenaltyPass(client, sequences, datums, trainingModelId, kl, options.signal);
    datums = penalty.datums;
    klMetrics = { kl_ref: penalty.klReference };
  }
  const learningRate = job.config?.learning_rate ?? TINKER_DEFAULT_LEARNING_RATE;
  // Submitted back to back: the server runs them in seq_id order.
  const [output, optimizer] = await Promise.all([
    client.forwardBackward(trainingModelId, datums, lossFn, {
      signal: options.signal,
      ...(lossFnConfig === undefined ? {} : { lossFnConfig }),
    }),
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
    ...klMetrics,
    ...serverMetrics(output.metrics),
  };
  options.onEvent({ type: 'gradient_step', data: metrics });
  return metrics;
}

/**
 * The KL penalty folded into the datums' advantages ({@link foldKlPenalty}): the reference's
 * logprobs of every sequence from its sampler, and the source's: the sampler's recorded ones
 * (`kl_penalty_source: "sample"`) or the training model's before the step (`current_learner`,
 * one forward pass, which also stands in for a sampled logprob that is unknown, as ART does).
 */
async function klPenaltyPass(
  client: TinkerClient,
  sequences: readonly TrainingSequence[],
  datums: readonly TinkerDatum[],
  trainingModelId: string,
  kl: KlReferencePass,
  signal: AbortSignal | undefined,
): Promise<{ datums: TinkerDatum[]; klReference: number }> {
  const masks = sequences.map((sequence) =>
    sequence.tokens.slice(1).map((_, index) => (sequence.mask[index + 1] === 1 ? 1 : 0)),
  );
  const sampled = datums.map((datum) => datum.logprobs ?? []);
  const needsLearner =
    kl.settings.source === 'current_learner' ||
    masks.some((mask, row) => mask.some((learned, index) => learned === 1 && !Number.isFinite(sampled[row]?.[index])));
  const learner = needsLearner
    ? client
        .forwardBackward(
          trainingModelId,
          datums.map((datum, row) => ({
            inputTokens: datum.inputTokens,
            targetTokens: datum.targetTokens,
            weights: masks[row] as number[],
          })),
          'cross_entropy',
          { signal, forwardOnly: true },
        )
        .then((result) => result.outputs.map((output) => output.logprobs))
    : Promise.resolve(undefined);
  const reference: number[][] = new Array(sequences.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    // After one request fails the step fails: the others still queued are not sent.
    while (next < sequences.length && !failed) {
      const row = next++;
      try {
        reference[row] = await kl.logprobs((sequences[row] as TrainingSequence).tokens, signal);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const [current] = await Promise.all([
    learner,
    ...Array.from({ length: Math.min(REFERENCE_CONCURRENCY, sequences.length) }, worker),
  ]);
  const folded = foldKlPenalty(
    datums.map((datum, row) => ({
      mask: masks[row] as number[],
      advantages: datum.advantages ?? [],
      source: (masks[row] as number[]).map((_, index) => {
        const recorded = sampled[row]?.[index];
        if (kl.settings.source === 'sample' && Number.isFinite(recorded)) return recorded as number;
        return current?.[row]?.[index] ?? Number.NaN;
      }),
      reference: reference[row] as number[],
    })),
    kl.settings.coef,
  );
  return {
    datums: datums.map((datum, row) => ({ ...datum, advantages: folded.advantages[row] as number[] })),
    klReference: folded.klReference,
  };
}

/** An SFT job: per batch, a `cross_entropy` forward/backward and one optimizer step. */
async function trainSft(
  client: TinkerClient,
  job: Extract<EngineTrainingJob, { kind: 'sft' }>,
  text: TextLayer,
  trainingModelId: string,
  options: JobOptions,
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

/** An SFT sequence as a datum: the mask's learned tokens weigh 1. */
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

/**
 * Training jobs on Hugging Face base models: LoRA adapters trained with the same losses, steps and
 * metrics as the built-in models, written as PEFT checkpoints.
 */
import type { Tensor, Tensor2D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../backend.js';
import { AdamW } from '../optimizer.js';
import {
  AUTO_SFT_BATCH_SIZE,
  DEFAULT_LEARNING_RATE,
  DEFAULT_SFT_LEARNING_RATE,
  checkCancelled,
  computeStep,
  lossSettings,
  nothingToTrain,
  truncate,
} from '../trainer.js';
import type { TrainableModel, TrainingHooks } from '../trainer.js';
import { scalesRewards } from '../training-data.js';
import type { TrainingSequence } from '../training-data.js';
import type { HfModelConfig } from './config.js';
import type { EngineTrainingJob, EngineTrainingResult } from '../types.js';
import type { HostWeights } from '../weights.js';
import { initialLora, loraSettingsOf, loraTensors, readAdapter, readAdapterOptimizer, writeAdapter } from './lora.js';
import type { LoraOptions, LoraSettings } from './lora.js';
import { forwardLogits, runnable } from './model.js';
import type { HfBaseCache, HfBaseModel } from './runtime.js';
import type { TextLayerLoader } from './text.js';
import { buildHfRlData, buildHfSftSequences } from './training-data.js';

/** The LoRA settings a job asks for, compared with those of the adapter it continues. */
function checkSettings(requested: LoraOptions | null, continued: LoraSettings): void {
  const asked = requested ?? {};
  const differs =
    (asked.lora_rank != null && asked.lora_rank !== continued.rank) ||
    (asked.lora_alpha != null && asked.lora_alpha !== continued.alpha) ||
    (asked.lora_target_modules != null &&
      loraSettingsOf(asked).targetModules.join(',') !== continued.targetModules.join(','));
  if (differs)
    throw new Error(
      `The job asks for LoRA rank ${asked.lora_rank ?? continued.rank}, alpha ${asked.lora_alpha ?? continued.alpha}, modules ${(asked.lora_target_modules ?? continued.targetModules).join(',')}, but the model's adapter has rank ${continued.rank}, alpha ${continued.alpha}, modules ${continued.targetModules.join(',')}: the LoRA shape is fixed by a model's first job.`,
    );
}

/** Bytes of activations one training pass may keep for the backward pass (the wasm heap is 4 GB at most). */
const ACTIVATION_BUDGET = 384 * 1024 * 1024;

/**
 * Padded tokens per pass: the activations a token keeps for the backward pass are about 12 hidden
 * and 5 MLP widths per layer (a learned position's logits add a few vocabulary-sized rows on top).
 */
export function tokensPerPass(config: HfModelConfig): number {
  const q = config.headCount * config.headDimension;
  const perToken = 4 * config.layerCount * (10 * config.hiddenSize + 2 * q + 5 * config.intermediateSize);
  return Math.max(16, Math.floor(ACTIVATION_BUDGET / perToken));
}

/** The adapter of a policy as a {@link TrainableModel} over the base model. */
export function trainableAdapter(
  tf: TensorFlow,
  model: HfBaseModel,
  settings: LoraSettings,
  weights: HostWeights,
): TrainableModel {
  const c = model.config;
  return {
    vocabularySize: c.vocabularySize,
    contextLength: c.contextLength,
    scoresPerRow: (length) => c.headCount * length * length,
    tokensPerPass: tokensPerPass(c),
    weights,
    forward: (parameters, tokens, batch, length, positions, offsets) => {
      const lora = loraTensors(c, settings, (name) => parameters[name] as Tensor2D);
      return forwardLogits(tf, runnable(c, model.base, lora), tokens, batch, length, positions, offsets) as Tensor;
    },
  };
}

/**
 * Runs a training job on the Hugging Face model in `directory` and writes the adapter checkpoint
 * to `job.outputPath`. Rejects with an Error whose message is fit for the user.
 */
export async function runHfTrainingJob(
  tf: TensorFlow,
  job: EngineTrainingJob,
  hooks: TrainingHooks,
  directory: string,
  loadText: TextLayerLoader,
  bases: HfBaseCache,
): Promise<EngineTrainingResult> {
  const model = await bases.load(tf, directory, loadText);
  const options = (job.config ?? null) as LoraOptions | null;
  let settings: LoraSettings;
  let weights: HostWeights;
  let optimizer: AdamW;
  if (job.policy.checkpointPath) {
    const adapter = await readAdapter(job.policy.checkpointPath, model.config);
    checkSettings(options, adapter.settings);
    settings = adapter.settings;
    weights = adapter.weights;
    optimizer = new AdamW(weights, await readAdapterOptimizer(job.policy.checkpointPath, weights));
  } else {
    settings = loraSettingsOf(options);
    weights = initialLora(model.config, settings);
    optimizer = new AdamW(weights, null);
  }
  const trainable = trainableAdapter(tf, model, settings, weights);
  let metrics: Record<string, number> = {};
  if (job.kind === 'rl') {
    const data = buildHfRlData(job.trajectoryGroups, job.config, model.text);
    const { sequences, truncated } = truncate(model.config, data.sequences);
    if (!sequences.some((sequence) => sequence.mask.includes(1)))
      throw new Error(nothingToTrain(data, truncated, model.config.contextLength));
    const learningRate = job.config?.learning_rate ?? DEFAULT_LEARNING_RATE;
    hooks.onEvent({ type: 'training_started', data: { num_sequences: 1 } });
    checkCancelled(hooks);
    const step = computeStep(tf, trainable, sequences, lossSettings('rl', job.config));
    checkCancelled(hooks);
    const gradNorm = step.trainableTokens > 0 ? optimizer.step(step.gradients, learningRate) : 0;
    metrics = {
      loss: step.loss,
      policy_loss: step.loss,
      grad_norm: gradNorm,
      entropy: step.entropy,
      learning_rate: learningRate,
      num_trajectories: data.trajectories,
      num_trainable_tokens: step.trainableTokens,
      num_groups_submitted: data.groupsSubmitted,
      num_groups_trainable: data.groupsTrainable,
      num_sequences_truncated: truncated,
      reward: data.reward,
      reward_std_dev: data.rewardStdDev,
      importance_ratio: step.meanRatio,
      clip_fraction: step.clippedFraction,
      kl_div: step.approximateKl,
      scale_rewards: scalesRewards(job.config) ? 1 : 0,
    };
    hooks.onEvent({ type: 'gradient_step', data: metrics });
  } else {
    const built = buildHfSftSequences(job.rows, job.config?.assistant_turns ?? 'all', model.text);
    const { sequences, truncated } = truncate(model.config, built);
    const requestedBatch = job.config?.batch_size;
    if (typeof requestedBatch === 'number' && !(Number.isInteger(requestedBatch) && requestedBatch >= 1))
      throw new Error(`config.batch_size must be a positive integer or "auto", got ${requestedBatch}.`);
    const batchSize =
      typeof requestedBatch === 'number'
        ? requestedBatch
        : Math.min(AUTO_SFT_BATCH_SIZE, Math.max(1, sequences.length));
    const batches: TrainingSequence[][] = [];
    for (let start = 0; start < sequences.length; start += batchSize)
      batches.push(sequences.slice(start, start + batchSize));
    const rates = job.config?.learning_rate;
    hooks.onEvent({ type: 'training_started', data: { num_sequences: batches.length } });
    let totalTokens = 0;
    let lossSum = 0;
    for (const [index, batch] of batches.entries()) {
      await new Promise((resolve) => setImmediate(resolve));
      checkCancelled(hooks);
      const learningRate = Array.isArray(rates)
        ? (rates[Math.min(index, rates.length - 1)] ?? DEFAULT_SFT_LEARNING_RATE)
        : (rates ?? DEFAULT_SFT_LEARNING_RATE);
      const step = computeStep(tf, trainable, batch, lossSettings('sft', null));
      const gradNorm = step.trainableTokens > 0 ? optimizer.step(step.gradients, learningRate) : 0;
      totalTokens += step.trainableTokens;
      lossSum += step.loss * step.trainableTokens;
      metrics = {
        loss: step.loss,
        grad_norm: gradNorm,
        entropy: step.entropy,
        learning_rate: learningRate,
        num_trajectories: batch.length,
        num_trainable_tokens: step.trainableTokens,
        num_groups_trainable: 0,
        num_sequences_truncated: truncated,
        batch_index: index,
        num_batches: batches.length,
      };
      hooks.onEvent({ type: 'gradient_step', data: metrics });
    }
    metrics = {
      ...metrics,
      mean_loss: totalTokens > 0 ? lossSum / totalTokens : 0,
      num_trainable_tokens_total: totalTokens,
    };
  }
  checkCancelled(hooks);
  const state = optimizer.state();
  await writeAdapter(job.outputPath, model.config, settings, weights, job.policy.baseModel, {
    optimizer: state,
    metadata: {
      format: 'policyloop-checkpoint',
      base_model: job.policy.baseModel,
      step: job.step,
      kind: job.kind,
      training_config: job.config,
      optimizer_steps: state.step,
      metrics,
      created_at: new Date().toISOString(),
      adapter: 'peft-lora',
    },
  });
  return { metrics };
}

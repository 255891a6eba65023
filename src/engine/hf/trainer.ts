/**
 * Training jobs on Hugging Face base models: LoRA adapters trained with the same losses, steps and
 * metrics as the built-in models, written as PEFT checkpoints.
 */
import type { Tensor, Tensor2D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../tensorflow.js';
import { AdamW } from '../optimizer.js';
import { checkCancelled, runSteps, truncate } from '../trainer.js';
import type { TrainableModel, TrainingHooks } from '../trainer.js';
import type { HfModelConfig } from './config.js';
import type { EngineTrainingJob, EngineTrainingResult } from '../types.js';
import type { HostWeights } from '../weights.js';
import { initialLora, loraSettingsOf, loraTensors, readAdapter, readAdapterOptimizer, writeAdapter } from './lora.js';
import type { LoraOptions, LoraSettings } from './lora.js';
import { forwardLogits, runnable } from './model.js';
import { assertTrainableInWasmHeap } from './runtime.js';
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
  assertTrainableInWasmHeap(model.directory, c);
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
  // No sliding window on these models: sequences are truncated, not cropped.
  const metrics = await runSteps(tf, job, hooks, trainable, optimizer, {
    contextLength: model.config.contextLength,
    rl: (groups, config) => {
      const data = buildHfRlData(groups, config, model.text);
      return { data, ...truncate(model.config, data.sequences) };
    },
    sft: (rows, assistantTurns) => truncate(model.config, buildHfSftSequences(rows, assistantTurns, model.text)),
  });
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

/**
 * Training jobs on Hugging Face base models: LoRA adapters trained with the same losses, steps and
 * metrics as the built-in models, written as PEFT checkpoints.
 */
import type { Tensor, Tensor2D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../tensorflow.js';
import { AdamW } from '../optimizer.js';
import { checkCancelled, referenceScorer, runSteps, truncate } from '../trainer.js';
import type { DifferentiableModel, ReferenceLoader, TrainingHooks } from '../trainer.js';
import type { HfModelConfig } from './config.js';
import type { EngineTrainingJob, EngineTrainingResult } from '../types.js';
import type { HostWeights } from '../weights.js';
import { initialLora, loraSettingsOf, loraTensors, readAdapter, readAdapterOptimizer, writeAdapter } from './lora.js';
import type { LoraOptions, LoraSettings } from './lora.js';
import type { WeightPlacement } from './files.js';
import {
  LOGITS_PER_CHUNK,
  PROJECTION_BLOCK_ROWS,
  forwardLogits,
  forwardTokenLogprobs,
  isHostLayer,
  runnable,
} from './model.js';
import { WASM_TRAINING_WEIGHT_BUDGET, blockWeightBytes, wasmWeightBytes } from './runtime.js';
import type { HfBaseCache, HfBaseModel } from './runtime.js';
import type { TextLayerLoader } from '../../text/loader.js';
import { buildHfRlData, buildHfSftSequences } from './training-data.js';
import type { NativeTraining } from '../trainer.js';
import type { BaseTensors } from './model.js';
import { OnnxTrainer, onnxBaseOf } from '../onnx/onnx-model.js';
import type { OnnxBase } from '../onnx/onnx-model.js';
import { engineRuntime, requestedEngineRuntime } from '../onnx/onnx-runtime.js';
import type { EngineRuntimeName } from '../onnx/onnx-runtime.js';

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

/** Bytes of one token's activations inside one block (about 12 hidden and 5 MLP widths). */
function blockBytesPerToken(config: HfModelConfig): number {
  const q = config.headCount * config.headDimension;
  return 4 * (10 * config.hiddenSize + 2 * q + 5 * config.intermediateSize);
}

/**
 * What one token costs a block's recomputation and backward pass over the estimate of
 * {@link blockBytesPerToken}: every intermediate and its gradient are held until the block's
 * backward pass ends (measured with `tf.profile`: a Qwen3-0.6B block over 1,016 tokens peaked at
 * ~1.1 GB, ~9 times the estimate).
 */
const BLOCK_BACKWARD_FACTOR = 9;

/**
 * Padded tokens per pass. With the weights in the heap, a pass keeps every block's activations to
 * its end; with the weights in host memory (checkpointed blocks), only each block's input, plus
 * one block's activations and their gradients at a time. The learned positions' logits come on
 * top, a chunk of positions at a time (`LOGITS_PER_CHUNK` in `model.ts`).
 */
export function tokensPerPass(config: HfModelConfig, placement: WeightPlacement = 'heap'): number {
  const perToken =
    placement === 'heap'
      ? config.layerCount * blockBytesPerToken(config)
      : 4 * config.layerCount * config.hiddenSize + BLOCK_BACKWARD_FACTOR * blockBytesPerToken(config);
  return Math.max(16, Math.floor(ACTIVATION_BUDGET / perToken));
}

/** Most bytes of the wasm heap (4 GB at most on wasm32) a training pass of a host-held model may need. */
const TRAINING_HEAP_BUDGET = 3.5e9;

/**
 * Bytes of wasm heap a training pass needs when the model's weights are in host memory: the
 * float32 weights of a block (twice over: the upload and, for XNNPACK, one packed copy), two
 * output-projection blocks, the activations of a pass and one chunk of its learned positions'
 * logits, held about ten times over.
 */
export function hostTrainingHeapBytes(config: HfModelConfig): number {
  const blockWeights = blockWeightBytes(config);
  const projectionBlock = 4 * Math.min(PROJECTION_BLOCK_ROWS, config.vocabularySize) * config.hiddenSize;
  return 2 * blockWeights + 2 * projectionBlock + ACTIVATION_BUDGET + 10 * 4 * LOGITS_PER_CHUNK;
}

/**
 * Throws, with the computed figure, when a training pass does not fit the wasm heap: with the
 * weights in the heap, for a model whose weights exceed `WASM_TRAINING_WEIGHT_BUDGET` (the training
 * worker holds those in host memory instead); with them in host memory, when one block and a
 * pass's activations still outgrow it.
 */
export function assertTrainable(directory: string, config: HfModelConfig, placement: WeightPlacement): void {
  if (placement === 'heap') {
    const bytes = wasmWeightBytes(config);
    if (bytes > WASM_TRAINING_WEIGHT_BUDGET)
      throw new Error(
        `${directory}: this model's float32 weights take about ${(bytes / 1e9).toFixed(1)} GB of the wasm backend's 4 GB heap, more than the ${(WASM_TRAINING_WEIGHT_BUDGET / 1e9).toFixed(1)} GB beside which a training pass's activations still fit: train it in the training worker thread (the engine's default), which keeps such a model's weights in host memory.`,
      );
    return;
  }
  const bytes = hostTrainingHeapBytes(config);
  if (bytes > TRAINING_HEAP_BUDGET)
    throw new Error(
      `${directory}: a training pass of this model needs about ${(bytes / 1e9).toFixed(1)} GB of the wasm backend's heap (one block's float32 weights uploaded from host memory, the pass's activations and logits), more than the ${(TRAINING_HEAP_BUDGET / 1e9).toFixed(1)} GB a 4 GB wasm32 heap allows.`,
    );
}

/** Each base model's weights for onnxruntime, converted once. */
const onnxBases = new WeakMap<BaseTensors, OnnxBase>();

/** Each onnxruntime base's training sessions, by LoRA shape. */
const onnxTrainers = new WeakMap<OnnxBase, Map<string, Promise<OnnxTrainer>>>();

/** The onnxruntime training sessions of a base model and LoRA shape, created once. */
function onnxTrainerOf(model: HfBaseModel, settings: LoraSettings): Promise<OnnxTrainer> {
  let base = onnxBases.get(model.base);
  if (!base) {
    base = onnxBaseOf(model.config, model.base);
    onnxBases.set(model.base, base);
  }
  let byShape = onnxTrainers.get(base);
  if (!byShape) {
    byShape = new Map();
    onnxTrainers.set(base, byShape);
  }
  const key = JSON.stringify(settings);
  let trainer = byShape.get(key);
  if (!trainer) {
    trainer = OnnxTrainer.create(base, settings);
    trainer.catch(() => byShape.delete(key));
    byShape.set(key, trainer);
  }
  return trainer;
}

/**
 * Bytes a pass on onnxruntime holds per padded token: every block's input and the linear outputs
 * its forward pass keeps (q, k, v, o, gate, up; LoRA's small `x · A` left out), plus one block's
 * intermediates and their gradients in its backward pass.
 */
function onnxBytesPerToken(config: HfModelConfig): number {
  const q = config.headCount * config.headDimension;
  const kv = config.keyValueHeadCount * config.headDimension;
  const kept = 2 * config.hiddenSize + q + 2 * kv + 2 * config.intermediateSize;
  return 4 * config.layerCount * kept + 3 * blockBytesPerToken(config);
}

/** Bytes of activations one pass on onnxruntime may hold (native memory, not the wasm heap). */
const ONNX_ACTIVATION_BUDGET = 768 * 1024 * 1024;

/**
 * The adapter of a policy as a {@link DifferentiableModel} over the base model. `options.logitsPerChunk`
 * bounds the logits the loss holds at once (default `LOGITS_PER_CHUNK`; tests make it small).
 * `options.runtime` is where its passes run: onnxruntime (the forward and backward graphs of
 * `src/engine/onnx`) or tfjs-wasm; by default the one `POLICYLOOP_ENGINE_RUNTIME` names, else
 * tfjs-wasm (the engine passes the runtime it resolved).
 */
export function trainableAdapter(
  tf: TensorFlow,
  model: HfBaseModel,
  settings: LoraSettings,
  weights: HostWeights,
  options: { readonly logitsPerChunk?: number | undefined; readonly runtime?: EngineRuntimeName | undefined } = {},
): DifferentiableModel {
  const c = model.config;
  const placement: WeightPlacement = model.base.layers.some((layer) => isHostLayer(layer)) ? 'host' : 'heap';
  const runtime = options.runtime ?? requestedEngineRuntime() ?? 'tfjs-wasm';
  const logitsPerChunk = options.logitsPerChunk ?? LOGITS_PER_CHUNK;
  const native: NativeTraining | undefined =
    runtime === 'onnxruntime'
      ? {
          scores: async (lora, tokens, batch, length, positions, offsets, targets, keep) =>
            (await onnxTrainerOf(model, settings)).pass(
              lora,
              tokens,
              batch,
              length,
              positions,
              offsets,
              targets,
              logitsPerChunk,
              keep,
            ),
        }
      : undefined;
  if (!native) assertTrainable(model.directory, c, placement);
  return {
    vocabularySize: c.vocabularySize,
    contextLength: c.contextLength,
    scoresPerRow: (length) => c.headCount * length * length,
    tokensPerPass: native
      ? Math.max(16, Math.floor(ONNX_ACTIVATION_BUDGET / onnxBytesPerToken(c)))
      : tokensPerPass(c, placement),
    weights,
    native,
    forward: (parameters, tokens, batch, length, positions, offsets) => {
      const lora = loraTensors(c, settings, (name) => parameters[name] as Tensor2D);
      return forwardLogits(tf, runnable(c, model.base, lora), tokens, batch, length, positions, offsets) as Tensor;
    },
    // A pass never holds all its learned positions' logits (151,936 a position for Qwen3).
    tokenLogprobs: (parameters, tokens, batch, length, positions, offsets, targets) => {
      const lora = loraTensors(c, settings, (name) => parameters[name] as Tensor2D);
      const adapted = runnable(c, model.base, lora);
      return forwardTokenLogprobs(
        tf,
        adapted,
        tokens,
        batch,
        length,
        positions,
        targets,
        offsets,
        options.logitsPerChunk ?? LOGITS_PER_CHUNK,
      );
    },
  };
}

/**
 * The KL penalty's reference policies of an adapter trained on `model`: the base model (null;
 * LoRA off: a fresh adapter's B matrices are zero) or a PEFT adapter folder of the same base.
 * @example
 * const reference = await hfReferenceLoader(tf, model, settings)(null); // the base model's logprobs
 */
export function hfReferenceLoader(
  tf: TensorFlow,
  model: HfBaseModel,
  settings: LoraSettings,
  runtime?: EngineRuntimeName,
): ReferenceLoader {
  return async (checkpointPath) => {
    if (checkpointPath === null) {
      const off = initialLora(model.config, settings);
      return referenceScorer(tf, trainableAdapter(tf, model, settings, off, { runtime }), off);
    }
    const adapter = await readAdapter(checkpointPath, model.config);
    return referenceScorer(
      tf,
      trainableAdapter(tf, model, adapter.settings, adapter.weights, { runtime }),
      adapter.weights,
    );
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
  // The engine's runtime; without one, onnxruntime when it loads (or as POLICYLOOP_ENGINE_RUNTIME says), else tfjs-wasm.
  const runtime = job.runtime ?? (await engineRuntime()).name;
  const trainable = trainableAdapter(tf, model, settings, weights, { runtime });
  // No sliding window on these models: sequences are truncated, not cropped.
  const metrics = await runSteps(
    tf,
    job,
    hooks,
    trainable,
    optimizer,
    {
      contextLength: model.config.contextLength,
      rl: (groups, config) => {
        const data = buildHfRlData(groups, config, model.text);
        return { data, ...truncate(model.config, data.sequences) };
      },
      sft: (rows, assistantTurns) => truncate(model.config, buildHfSftSequences(rows, assistantTurns, model.text)),
    },
    hfReferenceLoader(tf, model, settings, runtime),
  );
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

/**
 * Hugging Face base models loaded in this thread: config, weights, text layer, loaded once per
 * folder and shared by every policy (adapter) and training step that uses them.
 */
import type { TensorFlow } from '../tensorflow.js';
import type { HfModelConfig } from './config.js';
import { disposeBase, loadBaseTensors, readHfConfig } from './files.js';
import type { WeightPlacement } from './files.js';
import type { BaseTensors } from './model.js';
import type { TextLayer, TextLayerLoader } from '../../text/loader.js';

/** A loaded base model. */
export interface HfBaseModel {
  readonly directory: string;
  readonly config: HfModelConfig;
  readonly base: BaseTensors;
  readonly text: TextLayer;
}

/**
 * What a cache loads models for: `'sampling'` on tfjs holds every model's weights in the wasm heap;
 * `'onnx-sampling'` holds them in host memory as float32, where onnxruntime reads them without a
 * copy (and tfjs, should it run, uploads a block at a time); `'training'` holds those too large for a training pass beside
 * them in host memory ({@link trainingPlacement}).
 */
export type BaseCachePurpose = 'sampling' | 'onnx-sampling' | 'training';

/** Base models by folder, each loaded once (a training thread keeps one cache; each engine its own). */
export class HfBaseCache {
  private readonly loaded = new Map<string, Promise<HfBaseModel>>();

  /** @param purpose what the models are loaded for. @default 'sampling' */
  constructor(private readonly purpose: BaseCachePurpose = 'sampling') {}

  /** Loads (once) a Hugging Face base model. */
  load(tf: TensorFlow, directory: string, loadText: TextLayerLoader): Promise<HfBaseModel> {
    const cached = this.loaded.get(directory);
    if (cached) return cached;
    const loading = loadBase(tf, directory, loadText, this.purpose);
    loading.catch(() => this.loaded.delete(directory));
    this.loaded.set(directory, loading);
    return loading;
  }

  /** Frees every base model of this cache. */
  async unload(): Promise<void> {
    const all = [...this.loaded.values()];
    this.loaded.clear();
    for (const loading of all) {
      try {
        disposeBase((await loading).base);
      } catch {
        // A failed load holds no tensors.
      }
    }
  }
}

/** The base models of the training worker thread. */
export const workerBaseCache = new HfBaseCache('training');

/**
 * Bytes of the wasm backend's heap (wasm32: 4 GB at most) a model's weights may take; the rest is
 * for activations, the key/value cache, the logits and the copies the backward pass makes.
 */
const WASM_WEIGHT_BUDGET = 2.8e9;

/**
 * Bytes of wasm heap a model's weights take: the float32 linear layers and output projection, once
 * (no packed copy is kept: see `src/engine/hf/model.ts`); the embedding stays on the host.
 */
export function wasmWeightBytes(config: HfModelConfig): number {
  return config.layerCount * blockWeightBytes(config) + 4 * config.hiddenSize * config.vocabularySize;
}

/** Bytes of one block's linear weights in float32 (attention's four projections and the MLP's three). */
export function blockWeightBytes(config: HfModelConfig): number {
  const q = config.headCount * config.headDimension;
  const kv = config.keyValueHeadCount * config.headDimension;
  return 4 * (config.hiddenSize * (2 * q + 2 * kv) + 3 * config.hiddenSize * config.intermediateSize);
}

/**
 * Throws, with the computed need, when a model's weights do not fit the wasm heap beside its
 * activations (see {@link wasmWeightBytes}).
 */
export function assertFitsWasmHeap(directory: string, config: HfModelConfig): void {
  const bytes = wasmWeightBytes(config);
  if (bytes > WASM_WEIGHT_BUDGET)
    throw new Error(
      `${directory}: this model's float32 weights need about ${(bytes / 1e9).toFixed(1)} GB of the wasm backend's heap, more than the ${(WASM_WEIGHT_BUDGET / 1e9).toFixed(1)} GB a 4 GB wasm32 heap leaves beside activations: the engine runs models up to about 700M parameters (SmolLM2-135M/360M and Qwen3-0.6B fit; Llama-3.2-1B and Qwen3-1.7B do not).`,
    );
}

/**
 * Bytes of weights beside which a training pass still fits the wasm heap with the weights in it.
 * Measured: the SmolLM2-135M shape (0.5 GB of weights) trains 128-token rows; the Qwen3-0.6B shape
 * (2.4 GB) ran the heap out in training even on 64-token rows, while it samples.
 */
export const WASM_TRAINING_WEIGHT_BUDGET = 2.0e9;

/**
 * Where the training worker holds a model's blocks and output projection: in the wasm heap when a
 * training pass fits beside them (the faster path: no upload, no recomputation), else in host
 * memory, uploaded a block at a time with the block's activations recomputed in the backward pass.
 */
export function trainingPlacement(config: HfModelConfig): WeightPlacement {
  return wasmWeightBytes(config) > WASM_TRAINING_WEIGHT_BUDGET ? 'host' : 'heap';
}

async function loadBase(
  tf: TensorFlow,
  directory: string,
  loadText: TextLayerLoader,
  purpose: BaseCachePurpose,
): Promise<HfBaseModel> {
  const config = await readHfConfig(directory);
  assertFitsWasmHeap(directory, config);
  const text = await loadText(directory);
  if (text.vocabularySize > config.vocabularySize)
    throw new Error(
      `${directory}: the tokenizer has ${text.vocabularySize} tokens but config.json's vocab_size is ${config.vocabularySize}.`,
    );
  const base = await loadBaseTensors(
    tf,
    directory,
    config,
    purpose === 'training' ? trainingPlacement(config) : purpose === 'onnx-sampling' ? 'host' : 'heap',
    { float32: purpose === 'onnx-sampling' },
  );
  return { directory, config, base, text };
}

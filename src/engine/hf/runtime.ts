/**
 * Hugging Face base models loaded in this thread: config, weights, text layer, loaded once per
 * folder and shared by every policy (adapter) and training step that uses them.
 */
import type { TensorFlow } from '../tensorflow.js';
import type { HfModelConfig } from './config.js';
import { disposeBase, loadBaseTensors, readHfConfig } from './files.js';
import type { BaseTensors } from './model.js';
import type { TextLayer, TextLayerLoader } from './text.js';

/** A loaded base model. */
export interface HfBaseModel {
  readonly directory: string;
  readonly config: HfModelConfig;
  readonly base: BaseTensors;
  readonly text: TextLayer;
}

/** Base models by folder, each loaded once (a training thread keeps one cache; each engine its own). */
export class HfBaseCache {
  private readonly loaded = new Map<string, Promise<HfBaseModel>>();

  /** Loads (once) a Hugging Face base model. */
  load(tf: TensorFlow, directory: string, loadText: TextLayerLoader): Promise<HfBaseModel> {
    const cached = this.loaded.get(directory);
    if (cached) return cached;
    const loading = loadBase(tf, directory, loadText);
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
export const workerBaseCache = new HfBaseCache();

/** The wasm backend's heap (wasm32): 4 GB, of which some is needed for activations. */
const WASM_HEAP_BUDGET = 3.6e9;

/**
 * Bytes of wasm heap a model's weights take: float32 linear layers and output projection, each
 * twice (XNNPACK keeps a packed copy of every matrix it multiplies by); the embedding stays on the
 * host.
 */
export function wasmWeightBytes(config: HfModelConfig): number {
  const q = config.headCount * config.headDimension;
  const kv = config.keyValueHeadCount * config.headDimension;
  const perLayer = config.hiddenSize * (2 * q + 2 * kv) + 3 * config.hiddenSize * config.intermediateSize;
  return 2 * 4 * (config.layerCount * perLayer + config.hiddenSize * config.vocabularySize);
}

async function loadBase(tf: TensorFlow, directory: string, loadText: TextLayerLoader): Promise<HfBaseModel> {
  const config = await readHfConfig(directory);
  const bytes = wasmWeightBytes(config);
  if (bytes > WASM_HEAP_BUDGET)
    throw new Error(
      `${directory}: this model needs about ${(bytes / 1e9).toFixed(1)} GB of the wasm backend's heap for its float32 weights (each matrix and XNNPACK's packed copy of it), more than the ${(WASM_HEAP_BUDGET / 1e9).toFixed(1)} GB a 4 GB wasm32 heap leaves: the engine runs models up to about 400M parameters (SmolLM2-135M/360M fit; Qwen3-0.6B does not).`,
    );
  const text = await loadText(directory);
  if (text.vocabularySize > config.vocabularySize)
    throw new Error(
      `${directory}: the tokenizer has ${text.vocabularySize} tokens but config.json's vocab_size is ${config.vocabularySize}.`,
    );
  const base = await loadBaseTensors(tf, directory, config);
  return { directory, config, base, text };
}

/**
 * Reads a Hugging Face model folder as `huggingface-cli download` leaves it: `config.json`, the
 * weights (`model.safetensors`, or shards listed by `model.safetensors.index.json`) in F32, BF16 or
 * F16, widened to float32, and uploads them as the engine's {@link BaseTensors}.
 */
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Tensor2D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../tensorflow.js';
import { readSafetensors } from '../safetensors.js';
import type { HostTensor } from '../safetensors.js';
import { parseHfConfig } from './config.js';
import type { HfModelConfig } from './config.js';
import { LINEAR_MODULES, PROJECTION_BLOCK_ROWS } from './model.js';
import type { BaseTensors, LayerTensors, LinearModule } from './model.js';

/** The config file of a model folder. */
export const CONFIG_FILE = 'config.json';
/** The single-file weights of a model folder. */
export const SINGLE_WEIGHTS_FILE = 'model.safetensors';
/** The index of sharded weights. */
export const WEIGHTS_INDEX_FILE = 'model.safetensors.index.json';

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}

/** Reads and parses a JSON file, or throws an Error naming the missing or broken file. */
export async function readJsonFile(file: string, what: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new Error(`The model folder ${path.dirname(file)} has no ${path.basename(file)} (${what}).`);
  }
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not an object');
    return value as Record<string, unknown>;
  } catch (error) {
    throw new Error(
      `Expected a JSON object in ${file}, got unparseable text (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
}

/** Reads and normalises the `config.json` of a model folder. */
export async function readHfConfig(directory: string): Promise<HfModelConfig> {
  const file = path.join(directory, CONFIG_FILE);
  return parseHfConfig(await readJsonFile(file, 'the model configuration'), file);
}

/**
 * The weight files of a folder and which tensors each holds (null: all of a single file).
 * Throws naming `model.safetensors` when neither it nor the index exists.
 */
export async function weightFiles(directory: string): Promise<Map<string, Set<string> | null>> {
  const single = path.join(directory, SINGLE_WEIGHTS_FILE);
  if (await exists(single)) return new Map([[single, null]]);
  const indexFile = path.join(directory, WEIGHTS_INDEX_FILE);
  if (!(await exists(indexFile)))
    throw new Error(
      `The model folder ${directory} has no ${SINGLE_WEIGHTS_FILE} (nor ${WEIGHTS_INDEX_FILE} for sharded weights).`,
    );
  const index = await readJsonFile(indexFile, 'the index of sharded weights');
  const map = index['weight_map'];
  if (typeof map !== 'object' || map === null)
    throw new Error(`Expected a "weight_map" object in ${indexFile}, got ${JSON.stringify(map)}.`);
  const files = new Map<string, Set<string>>();
  for (const [name, file] of Object.entries(map as Record<string, unknown>)) {
    if (typeof file !== 'string')
      throw new Error(`${indexFile}: expected a file name for ${name}, got ${JSON.stringify(file)}.`);
    const full = path.join(directory, file);
    let names = files.get(full);
    if (!names) {
      names = new Set();
      files.set(full, names);
    }
    names.add(name);
  }
  for (const file of files.keys())
    if (!(await exists(file)))
      throw new Error(
        `The model folder ${directory} lacks the weight shard ${path.basename(file)} named by ${WEIGHTS_INDEX_FILE}.`,
      );
  return files;
}

/** Calls `visit` with every float tensor of the folder's weights, one file at a time. */
export async function forEachWeight(
  directory: string,
  visit: (name: string, tensor: HostTensor) => void,
): Promise<void> {
  for (const [file, names] of await weightFiles(directory)) {
    await readSafetensors(file, { dtypes: ['F32', 'BF16', 'F16'], onTensor: visit, ...(names ? { names } : {}) });
  }
}

/** `[rows, columns]` row-major to `[columns, rows]`. */
export function transposeHost(data: Float32Array, rows: number, columns: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let row = 0; row < rows; row += 1) {
    const base = row * columns;
    for (let column = 0; column < columns; column += 1) out[column * rows + row] = data[base + column] as number;
  }
  return out;
}

const LINEAR_PARENT: Readonly<Record<LinearModule, 'self_attn' | 'mlp'>> = {
  q_proj: 'self_attn',
  k_proj: 'self_attn',
  v_proj: 'self_attn',
  o_proj: 'self_attn',
  gate_proj: 'mlp',
  up_proj: 'mlp',
  down_proj: 'mlp',
};

/** The transformers module path of a linear layer, e.g. `model.layers.0.self_attn.q_proj`. */
export function linearModulePath(layer: number, module: LinearModule): string {
  return `model.layers.${layer}.${LINEAR_PARENT[module]}.${module}`;
}

/** Expected `[out, in]` shape of a linear layer's weight. */
export function linearShape(config: HfModelConfig, module: LinearModule): [number, number] {
  const q = config.headCount * config.headDimension;
  const kv = config.keyValueHeadCount * config.headDimension;
  switch (module) {
    case 'q_proj':
      return [q, config.hiddenSize];
    case 'k_proj':
    case 'v_proj':
      return [kv, config.hiddenSize];
    case 'o_proj':
      return [config.hiddenSize, q];
    case 'gate_proj':
    case 'up_proj':
      return [config.intermediateSize, config.hiddenSize];
    case 'down_proj':
      return [config.hiddenSize, config.intermediateSize];
  }
}

/**
 * Loads a model folder's weights into tensors (matrices as transformers stores them, `[out, in]`),
 * checking every expected tensor's presence and shape.
 */
export async function loadBaseTensors(tf: TensorFlow, directory: string, config: HfModelConfig): Promise<BaseTensors> {
  const expected = new Map<string, readonly number[]>();
  const d = config.hiddenSize;
  expected.set('model.embed_tokens.weight', [config.vocabularySize, d]);
  expected.set('model.norm.weight', [d]);
  if (!config.tiedEmbeddings) expected.set('lm_head.weight', [config.vocabularySize, d]);
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    expected.set(`model.layers.${layer}.input_layernorm.weight`, [d]);
    expected.set(`model.layers.${layer}.post_attention_layernorm.weight`, [d]);
    if (config.queryKeyNorm) {
      expected.set(`model.layers.${layer}.self_attn.q_norm.weight`, [config.headDimension]);
      expected.set(`model.layers.${layer}.self_attn.k_norm.weight`, [config.headDimension]);
    }
    for (const module of LINEAR_MODULES) {
      const shape = linearShape(config, module);
      expected.set(`${linearModulePath(layer, module)}.weight`, shape);
      if (config.attentionBias && LINEAR_PARENT[module] === 'self_attn')
        expected.set(`${linearModulePath(layer, module)}.bias`, [shape[0]]);
    }
  }
  const uploaded = new Map<string, ReturnType<TensorFlow['tensor']> | Float32Array>();
  let hostEmbedding: Float32Array | null = null;
  try {
    await forEachWeight(directory, (name, tensor) => {
      const shape = expected.get(name);
      if (!shape) return;
      if (tensor.shape.join(',') !== shape.join(','))
        throw new Error(
          `${directory}: tensor ${name} has shape [${tensor.shape.join(', ')}], expected [${shape.join(', ')}] from config.json.`,
        );
      if (name === 'model.embed_tokens.weight') {
        hostEmbedding = tensor.data;
        if (config.tiedEmbeddings) uploaded.set('output', tensor.data);
      } else if (name === 'lm_head.weight') {
        uploaded.set(name, tensor.data);
      } else {
        uploaded.set(name, tf.tensor(tensor.data, [...shape]));
      }
    });
    const missing = [...expected.keys()].filter(
      (name) => !uploaded.has(name) && !(name === 'model.embed_tokens.weight' && hostEmbedding),
    );
    if (missing.length > 0)
      throw new Error(
        `${directory}: the weights lack ${missing.length} tensor(s) that config.json implies, first ${missing[0]}.`,
      );
  } catch (error) {
    for (const tensor of uploaded.values()) if (!(tensor instanceof Float32Array)) tensor.dispose();
    throw error;
  }
  // The projection goes up last, in blocks of rows, once every other tensor is known to be there.
  const projection = uploaded.get(config.tiedEmbeddings ? 'output' : 'lm_head.weight') as Float32Array;
  const output: Tensor2D[] = [];
  for (let start = 0; start < config.vocabularySize; start += PROJECTION_BLOCK_ROWS) {
    const rows = Math.min(PROJECTION_BLOCK_ROWS, config.vocabularySize - start);
    output.push(tf.tensor2d(projection.subarray(start * d, (start + rows) * d), [rows, d]));
  }
  const get = <T>(name: string): T => uploaded.get(name) as T;
  const layers: LayerTensors[] = [];
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const prefix = `model.layers.${layer}`;
    const linear = {} as Record<LinearModule, ReturnType<typeof get>>;
    const bias: Partial<Record<LinearModule, ReturnType<typeof get>>> = {};
    for (const module of LINEAR_MODULES) {
      linear[module] = get(`${linearModulePath(layer, module)}.weight`);
      if (uploaded.has(`${linearModulePath(layer, module)}.bias`))
        bias[module] = get(`${linearModulePath(layer, module)}.bias`);
    }
    layers.push({
      inputNorm: get(`${prefix}.input_layernorm.weight`),
      postAttentionNorm: get(`${prefix}.post_attention_layernorm.weight`),
      linear: linear as LayerTensors['linear'],
      bias: bias as LayerTensors['bias'],
      ...(config.queryKeyNorm
        ? { queryNorm: get(`${prefix}.self_attn.q_norm.weight`), keyNorm: get(`${prefix}.self_attn.k_norm.weight`) }
        : {}),
    });
  }
  return {
    hostEmbedding: hostEmbedding as unknown as Float32Array,
    output,
    finalNorm: get('model.norm.weight'),
    layers,
  };
}

/** Disposes the tensors of a base model. */
export function disposeBase(base: BaseTensors): void {
  const all = new Set([...base.output, base.finalNorm]);
  for (const layer of base.layers) {
    all.add(layer.inputNorm);
    all.add(layer.postAttentionNorm);
    for (const tensor of Object.values(layer.linear)) all.add(tensor);
    for (const tensor of Object.values(layer.bias)) if (tensor) all.add(tensor);
    if (layer.queryNorm) all.add(layer.queryNorm);
    if (layer.keyNorm) all.add(layer.keyNorm);
  }
  for (const tensor of all) tensor.dispose();
}

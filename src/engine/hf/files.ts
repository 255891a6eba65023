/**
 * Reads a Hugging Face model folder as `huggingface-cli download` leaves it: `config.json`, the
 * weights (`model.safetensors`, or shards listed by `model.safetensors.index.json`) in F32, BF16 or
 * F16, widened to float32, and holds them as the engine's {@link BaseTensors} (in the wasm heap, or in
 * host memory for training models too large for it).
 */
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Tensor, Tensor1D, Tensor2D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../tensorflow.js';
import { readSafetensors } from '../safetensors.js';
import type { HostTensor } from '../safetensors.js';
import { parseHfConfig } from './config.js';
import type { HfModelConfig } from './config.js';
import {
  LINEAR_MODULES,
  PROJECTION_BLOCK_ROWS,
  isHostLayer,
  isHostMatrix,
  uploadHost,
  widenBfloat16,
} from './model.js';
import type {
  BaseTensors,
  FrozenMatrix,
  HostLayer,
  HostMatrix,
  HostValues,
  LayerTensors,
  LinearModule,
} from './model.js';

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

/**
 * Calls `visit` with every float tensor of the folder's weights, one file at a time (widened to
 * float32; BF16 tensors go to `visitBfloat16` as their bits instead when it is given: see
 * `DecodeOptions.onBfloat16`).
 */
export async function forEachWeight(
  directory: string,
  visit: (name: string, tensor: HostTensor) => void,
  visitBfloat16?: (name: string, shape: readonly number[], bits: Uint16Array) => void,
): Promise<void> {
  for (const [file, names] of await weightFiles(directory)) {
    await readSafetensors(file, {
      dtypes: ['F32', 'BF16', 'F16'],
      onTensor: visit,
      onBfloat16: visitBfloat16,
      ...(names ? { names } : {}),
    });
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
 * Where a base model's blocks and output projection are held: in the wasm heap as tensors
 * (sampling, and training of models that fit beside a pass), or in host memory, uploaded a block
 * at a time (training of larger models: see `HostLayer` in `model.ts`).
 */
export type WeightPlacement = 'heap' | 'host';

/**
 * The values as bfloat16 bits (the upper half of each float32) when every one is exactly a
 * bfloat16, as a BF16 checkpoint's widened values are; else the float32 values themselves.
 */
export function compactValues(data: Float32Array): HostValues {
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  for (let index = 0; index < bits.length; index += 1) if (((bits[index] as number) & 0xffff) !== 0) return data;
  const out = new Uint16Array(data.length);
  for (let index = 0; index < bits.length; index += 1) out[index] = (bits[index] as number) >>> 16;
  return out;
}

/**
 * Loads a model folder's weights (matrices as transformers stores them, `[out, in]`), checking
 * every expected tensor's presence and shape. The embedding stays in host memory (as bfloat16
 * bits when its values are exactly bfloat16); the blocks and the output projection go where
 * `placement` says (host matrices are kept as bfloat16 bits the same way). With `options.float32`
 * host values stay float32 (bfloat16 ones widened once), as onnxruntime reads them.
 */
export async function loadBaseTensors(
  tf: TensorFlow,
  directory: string,
  config: HfModelConfig,
  placement: WeightPlacement = 'heap',
  options: { readonly float32?: boolean | undefined } = {},
): Promise<BaseTensors> {
  // Widened once here rather than held as bfloat16 bits beside onnxruntime's float32 copy.
  const float32 = options.float32 === true;
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
  // Tensors (in the heap) or host values, by name; the embedding and projection stay on the host.
  const held = new Map<string, Tensor | HostValues>();
  const disposeHeld = (): void => {
    for (const value of held.values())
      if (!(value instanceof Float32Array || value instanceof Uint16Array)) value.dispose();
  };
  try {
    const shapeOf = (name: string, shape: readonly number[]): readonly number[] | null => {
      const wanted = expected.get(name);
      if (!wanted) return null;
      if (shape.join(',') !== wanted.join(','))
        throw new Error(
          `${directory}: tensor ${name} has shape [${shape.join(', ')}], expected [${wanted.join(', ')}] from config.json.`,
        );
      return wanted;
    };
    const onHost = (name: string): boolean =>
      name === 'model.embed_tokens.weight' ||
      name === 'lm_head.weight' ||
      (placement === 'host' && name !== 'model.norm.weight');
    await forEachWeight(
      directory,
      (name, tensor) => {
        const shape = shapeOf(name, tensor.shape);
        if (!shape) return;
        if (!onHost(name)) held.set(name, tf.tensor(tensor.data, [...shape]));
        else held.set(name, shape.length === 2 && !float32 ? compactValues(tensor.data) : tensor.data);
      },
      // BF16 tensors as they are in the file: no float32 copy of a whole file's weights at once.
      (name, fileShape, bits) => {
        const shape = shapeOf(name, fileShape);
        if (!shape) return;
        if (shape.length !== 2 || (float32 && onHost(name))) {
          const widened = new Float32Array(bits.length);
          widenBfloat16(bits, widened);
          held.set(name, onHost(name) ? widened : tf.tensor(widened, [...shape]));
        } else if (onHost(name)) {
          // Host matrices of the heap placement are copied so that the file's bytes can go.
          held.set(name, placement === 'host' ? bits : bits.slice());
        } else {
          held.set(name, uploadHost(tf, bits, shape));
        }
      },
    );
    const missing = [...expected.keys()].filter((name) => !held.has(name));
    if (missing.length > 0)
      throw new Error(
        `${directory}: the weights lack ${missing.length} tensor(s) that config.json implies, first ${missing[0]}.`,
      );
  } catch (error) {
    disposeHeld();
    throw error;
  }
  const hostEmbedding = held.get('model.embed_tokens.weight') as HostValues;
  // The projection goes up last, in blocks of rows, once every other tensor is known to be there.
  const projection = config.tiedEmbeddings ? hostEmbedding : (held.get('lm_head.weight') as HostValues);
  const output: FrozenMatrix[] = [];
  for (let start = 0; start < config.vocabularySize; start += PROJECTION_BLOCK_ROWS) {
    const rows = Math.min(PROJECTION_BLOCK_ROWS, config.vocabularySize - start);
    const values = projection.subarray(start * d, (start + rows) * d);
    output.push(placement === 'host' ? { shape: [rows, d], values } : (uploadHost(tf, values, [rows, d]) as Tensor2D));
  }
  const get = <T>(name: string): T => held.get(name) as T;
  const optional = <T>(name: string): T | undefined => (held.has(name) ? get<T>(name) : undefined);
  const layers: (LayerTensors | HostLayer)[] = [];
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const prefix = `model.layers.${layer}`;
    const linear = {} as Record<LinearModule, Tensor2D | HostMatrix>;
    const bias: Partial<Record<LinearModule, Tensor1D | Float32Array>> = {};
    for (const module of LINEAR_MODULES) {
      const name = `${linearModulePath(layer, module)}.weight`;
      linear[module] =
        placement === 'host' ? { shape: linearShape(config, module), values: get<HostValues>(name) } : get(name);
      const moduleBias = optional<Tensor1D | Float32Array>(`${linearModulePath(layer, module)}.bias`);
      if (moduleBias) bias[module] = moduleBias;
    }
    layers.push({
      inputNorm: get(`${prefix}.input_layernorm.weight`),
      postAttentionNorm: get(`${prefix}.post_attention_layernorm.weight`),
      linear,
      bias,
      queryNorm: optional(`${prefix}.self_attn.q_norm.weight`),
      keyNorm: optional(`${prefix}.self_attn.k_norm.weight`),
    } as LayerTensors | HostLayer);
  }
  return { hostEmbedding, output, finalNorm: get('model.norm.weight'), layers };
}

/** Disposes the tensors of a base model (host arrays are left to the garbage collector). */
export function disposeBase(base: BaseTensors): void {
  const all = new Set<Tensor>([base.finalNorm]);
  for (const block of base.output) if (!isHostMatrix(block)) all.add(block);
  for (const layer of base.layers) {
    if (isHostLayer(layer)) continue;
    all.add(layer.inputNorm);
    all.add(layer.postAttentionNorm);
    for (const tensor of Object.values(layer.linear)) all.add(tensor);
    for (const tensor of Object.values(layer.bias)) if (tensor) all.add(tensor);
    if (layer.queryNorm) all.add(layer.queryNorm);
    if (layer.keyNorm) all.add(layer.keyNorm);
  }
  for (const tensor of all) tensor.dispose();
}

/**
 * The forward pass of Llama and Qwen3 models in float32 on tfjs: RMSNorm, rotary embeddings,
 * grouped-query attention, SwiGLU, Qwen3's q/k norms, with optional LoRA adapters on the linear
 * layers. Two paths share the weights: {@link forwardLogits} over whole right-padded sequences
 * (training, differentiable in the LoRA weights) and {@link prefill} + {@link decodeStep} with a
 * key/value cache (sampling).
 *
 * Weight matrices are held as transformers stores them, `[out, in]`, and each is the FIRST operand
 * of its product, `(W · xᵀ)ᵀ`: the wasm backend hands a plain 2-D `matMul` to XNNPACK, which packs
 * the SECOND operand into a copy it keeps until that tensor is disposed. With the weight first, the
 * heap holds each weight once and only the small activation is packed, per call; with the weight
 * second, every weight would be held twice (a 0.6B model's ~4.8 GB do not fit a 4 GB wasm32 heap).
 */
import type { Tensor, Tensor1D, Tensor2D, Tensor3D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../tensorflow.js';
import { transposeLast } from '../gradients.js';
import type { HfModelConfig } from './config.js';
import { inverseFrequencies, rotaryTables } from './config.js';
import { attendSegments, disposeCache, growSegments, lastPromptRows, targetScores } from '../transformer.js';
import type { KeyValueCache, TokenScores } from '../transformer.js';

/** The linear layers of a block that LoRA can adapt, by their transformers module names. */
export const LINEAR_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

/** One of {@link LINEAR_MODULES}. */
export type LinearModule = (typeof LINEAR_MODULES)[number];

/**
 * A block's weights, vectors as `V` and linear weights `[out, in]` as `M`: tensors in the heap
 * ({@link LayerTensors}) or arrays in host memory ({@link HostLayer}).
 */
export interface BlockWeights<V, M> {
  readonly inputNorm: V;
  readonly postAttentionNorm: V;
  readonly linear: Readonly<Record<LinearModule, M>>;
  readonly bias: Readonly<Partial<Record<LinearModule, V>>>;
  readonly queryNorm?: V | undefined;
  readonly keyNorm?: V | undefined;
}

/** A block's weights as tensors. */
export type LayerTensors = BlockWeights<Tensor1D, Tensor2D>;

/**
 * Host values of a frozen weight: float32, or bfloat16 bits (the upper half of each float32) when
 * every value is exactly a bfloat16 (a BF16 checkpoint's are), which halves the host memory.
 */
export type HostValues = Float32Array | Uint16Array;

/** A frozen matrix `[rows, columns]` in host memory, uploaded to the heap only while it is used. */
export interface HostMatrix {
  readonly shape: readonly [number, number];
  readonly values: HostValues;
}

/**
 * A block's weights in host memory (see {@link HostMatrix}): training a model whose weights would
 * fill the wasm heap uploads one block at a time, just before its forward or backward pass, and
 * frees it after.
 */
export type HostLayer = BlockWeights<Float32Array, HostMatrix>;

/** A frozen matrix in the heap (a tensor) or in host memory (uploaded for each use). */
export type FrozenMatrix = Tensor2D | HostMatrix;

/**
 * A whole model's base weights, shared by every policy built on it. The token embedding stays in
 * host memory only (it is frozen: tokens are looked up on the host), which keeps a 0.6B model's
 * ~0.6 GB embedding out of the 4 GB wasm heap. The blocks and the output projection are tensors
 * (sampling, and training of models that fit the heap) or host arrays uploaded a block at a time
 * (training of larger ones: see {@link HostLayer}).
 */
export interface BaseTensors {
  /** The token embedding `[vocabulary, hidden]`, row-major, in host memory. */
  readonly hostEmbedding: HostValues;
  /**
   * Output projection `[vocabulary, hidden]` (the embedding itself when tied), as consecutive
   * blocks of at most {@link PROJECTION_BLOCK_ROWS} rows.
   */
  readonly output: readonly FrozenMatrix[];
  readonly finalNorm: Tensor1D;
  readonly layers: readonly (LayerTensors | HostLayer)[];
}

/** Whether a frozen matrix is held in host memory. */
export function isHostMatrix(matrix: FrozenMatrix): matrix is HostMatrix {
  return 'values' in matrix;
}

/** Whether a block's weights are held in host memory. */
export function isHostLayer(layer: LayerTensors | HostLayer): layer is HostLayer {
  return layer.inputNorm instanceof Float32Array;
}

/**
 * Reused float32 buffer for widening bfloat16 values before an upload (the wasm backend copies a
 * new tensor's values into its heap at once, so the buffer is free again after `tf.tensor`).
 */
let widened = new Float32Array(0);

/**
 * Writes bfloat16 `bits` widened exactly to float32 into `out`, from element `offset` on (a
 * bfloat16 is the upper half of a float32).
 */
export function widenBfloat16(bits: Uint16Array, out: Float32Array, offset = 0): void {
  const target = new Uint32Array(out.buffer, out.byteOffset + offset * 4, bits.length);
  for (let index = 0; index < bits.length; index += 1) target[index] = (bits[index] as number) << 16;
}

/** Uploads host values as a float32 tensor of `shape` (bfloat16 bits widened exactly). */
export function uploadHost(tf: TensorFlow, values: HostValues, shape: readonly number[]): Tensor {
  if (values instanceof Float32Array) return tf.tensor(values, [...shape]);
  if (widened.length < values.length) widened = new Float32Array(values.length);
  widenBfloat16(values, widened);
  return tf.tensor(widened.subarray(0, values.length), [...shape]);
}

/** The tensor of a frozen matrix: itself, or a fresh upload the caller disposes. */
function matrixTensor(tf: TensorFlow, matrix: FrozenMatrix): { tensor: Tensor2D; uploaded: boolean } {
  if (!isHostMatrix(matrix)) return { tensor: matrix, uploaded: false };
  return { tensor: uploadHost(tf, matrix.values, matrix.shape) as Tensor2D, uploaded: true };
}

/** A block's weights as tensors; `release` frees them when they were uploaded from host memory. */
function layerTensors(tf: TensorFlow, layer: LayerTensors | HostLayer): { weights: LayerTensors; release: () => void } {
  if (!isHostLayer(layer)) return { weights: layer, release: () => undefined };
  const vector = (values: Float32Array): Tensor1D => tf.tensor1d(values);
  const linear = {} as Record<LinearModule, Tensor2D>;
  for (const module of LINEAR_MODULES)
    linear[module] = uploadHost(tf, layer.linear[module].values, layer.linear[module].shape) as Tensor2D;
  const bias: Partial<Record<LinearModule, Tensor1D>> = {};
  for (const module of LINEAR_MODULES) {
    const values = layer.bias[module];
    if (values) bias[module] = vector(values);
  }
  const weights: LayerTensors = {
    inputNorm: vector(layer.inputNorm),
    postAttentionNorm: vector(layer.postAttentionNorm),
    linear,
    bias,
    queryNorm: layer.queryNorm ? vector(layer.queryNorm) : undefined,
    keyNorm: layer.keyNorm ? vector(layer.keyNorm) : undefined,
  };
  const release = (): void => {
    for (const tensor of [
      weights.inputNorm,
      weights.postAttentionNorm,
      ...Object.values(linear),
      ...Object.values(bias),
      weights.queryNorm,
      weights.keyNorm,
    ])
      tensor?.dispose();
  };
  return { weights, release };
}

/** LoRA weights of one linear layer: `A` `[in, rank]`, `B` `[rank, out]`. */
export interface LoraPair {
  readonly a: Tensor2D;
  readonly b: Tensor2D;
}

/** LoRA adapters by layer, then module; `scale` is `alpha / rank`. */
export interface LoraTensors {
  readonly scale: number;
  readonly layers: readonly Readonly<Partial<Record<LinearModule, LoraPair>>>[];
}

/** A model ready to run: its config, base weights, rotary frequencies, and optional adapters. */
export interface RunnableModel {
  readonly config: HfModelConfig;
  readonly base: BaseTensors;
  readonly frequencies: Float32Array;
  readonly lora: LoraTensors | null;
}

/** Builds the runnable model of a config and its weights. */
export function runnable(config: HfModelConfig, base: BaseTensors, lora: LoraTensors | null): RunnableModel {
  return { config, base, frequencies: inverseFrequencies(config), lora };
}

function rmsNorm(tf: TensorFlow, x: Tensor, weight: Tensor, epsilon: number): Tensor {
  const variance = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(variance, epsilon))), weight);
}

/** A matrix transposed (a single row or column only reshaped). */
function swapAxes(tf: TensorFlow, x: Tensor2D): Tensor2D {
  const [rows, columns] = x.shape;
  return (rows === 1 || columns === 1 ? tf.reshape(x, [columns, rows]) : tf.transpose(x)) as Tensor2D;
}

/**
 * Most rows of one output-projection block (a Qwen3 projection has 151,936): the backward pass
 * copies one block at a time for XNNPACK to pack, rather than the whole 0.6 GB at once.
 */
export const PROJECTION_BLOCK_ROWS = 16384;

/**
 * `x · Wᵀ` for a frozen weight `W` `[out, in]` given as blocks of its rows, and `x` `[tokens, in]`,
 * computed as `(W · xᵀ)ᵀ` (see the module comment); differentiable in `x`. The forward pass keeps
 * nothing but its result (the transposes and their packed copies are freed at once); the backward
 * pass computes `dy · W` block by block over a copy of each block, so no packed copy of a weight
 * outlives it. `xColumns`, the transpose of `x`, may be passed to share it (and its packed copy).
 * A block in host memory is uploaded for each product and freed after it.
 */
function frozenProduct(tf: TensorFlow, blocks: readonly FrozenMatrix[], x: Tensor2D, xColumns?: Tensor2D): Tensor2D {
  const product = tf.customGrad((...inputs) => {
    const columns = xColumns ?? swapAxes(tf, inputs[0] as Tensor2D);
    const parts = blocks.map((block) => {
      const { tensor, uploaded } = matrixTensor(tf, block);
      const part = tf.matMul(tensor, columns);
      if (uploaded) tensor.dispose();
      return part;
    });
    const transposed = parts.length === 1 ? (parts[0] as Tensor2D) : (tf.concat(parts, 0) as Tensor2D);
    const value = swapAxes(tf, transposed);
    if (!xColumns) columns.dispose();
    for (const part of parts) part.dispose();
    transposed.dispose();
    return { value, gradFunc: (dy: Tensor) => weightTimes(tf, dy as Tensor2D, blocks) };
  });
  return product(x) as Tensor2D;
}

/**
 * `dy · W` block by block, each block copied (for XNNPACK to pack) or uploaded from host memory,
 * used and freed before the next.
 */
function weightTimes(tf: TensorFlow, dy: Tensor2D, blocks: readonly FrozenMatrix[]): Tensor2D {
  const dyParts =
    blocks.length === 1
      ? [dy]
      : tf.split(
          dy,
          blocks.map((block) => block.shape[0] as number),
          1,
        );
  const one = tf.scalar(1);
  let sum: Tensor2D | null = null;
  blocks.forEach((block, index) => {
    const next: Tensor2D = tf.tidy(() => {
      const weight = (isHostMatrix(block) ? uploadHost(tf, block.values, block.shape) : tf.mul(block, one)) as Tensor2D;
      const part: Tensor2D = tf.matMul(dyParts[index] as Tensor2D, weight);
      return sum === null ? part : (tf.add(sum, part) as Tensor2D);
    });
    sum?.dispose();
    sum = next;
  });
  return sum as unknown as Tensor2D;
}

/**
 * The linear layers `modules` of a block over the same input `x` `[tokens, in]` (q/k/v, gate/up):
 * the transpose of `x` is made, and packed by XNNPACK, once for all of them and freed after.
 */
function linears(
  tf: TensorFlow,
  model: RunnableModel,
  layer: number,
  weights: LayerTensors,
  modules: readonly LinearModule[],
  x: Tensor2D,
): Tensor2D[] {
  const columns = swapAxes(tf, x);
  const outputs = modules.map((module) => {
    let y = frozenProduct(tf, [weights.linear[module]], x, columns);
    const bias = weights.bias[module];
    if (bias) y = tf.add(y, bias);
    const adapter = model.lora?.layers[layer]?.[module];
    // The scale goes on the small B (rank × out), not on a tokens × out product the pass would keep.
    if (adapter)
      y = tf.add(y, tf.matMul(tf.matMul(x, adapter.a), tf.mul(adapter.b, (model.lora as LoraTensors).scale)));
    return y;
  });
  // Not on the gradient's path (the products' gradient is their own), so it can go now.
  columns.dispose();
  return outputs;
}

/** The rotary tables of some token positions, `[tokens, 1, headDim]`, and the half-turn matrix. */
interface Rotary {
  readonly cos: Tensor;
  readonly sin: Tensor;
  /** `[headDim, headDim]`: `x · turn` is transformers' `rotate_half(x)`, `[-x2, x1]`. */
  readonly turn: Tensor2D;
}

function rotaryOf(tf: TensorFlow, model: RunnableModel, positions: Int32Array): Rotary {
  const c = model.config;
  const d = c.headDimension;
  const half = d / 2;
  const tables = rotaryTables(c, model.frequencies, positions);
  const turn = new Float32Array(d * d);
  for (let column = 0; column < half; column += 1) {
    turn[(column + half) * d + column] = -1;
    turn[column * d + column + half] = 1;
  }
  return {
    cos: tf.tensor3d(tables.cos, [positions.length, 1, d]),
    sin: tf.tensor3d(tables.sin, [positions.length, 1, d]),
    turn: tf.tensor2d(turn, [d, d]),
  };
}

/**
 * `x · cos + rotate_half(x) · sin` for `x` `[tokens, heads, headDim]`. `rotate_half` is a product
 * with a signed permutation: the wasm backend's `slice` copies its whole input per call.
 */
function rotate(tf: TensorFlow, x: Tensor, rotary: Rotary): Tensor3D {
  const [tokens, heads, d] = x.shape as [number, number, number];
  const turned = tf.reshape(tf.matMul(tf.reshape(x, [tokens * heads, d]) as Tensor2D, rotary.turn), x.shape);
  return tf.add(tf.mul(x, rotary.cos), tf.mul(turned, rotary.sin)) as Tensor3D;
}

/**
 * Queries and keys of one block for `rows` token positions (`x` `[rows, hidden]`), normed (Qwen3)
 * and rotated: `[rows, heads, headDim]` and `[rows, kvHeads, headDim]`, plus values.
 */
function projectQkv(
  tf: TensorFlow,
  model: RunnableModel,
  layer: number,
  weights: LayerTensors,
  h: Tensor2D,
  rotary: Rotary,
): { q: Tensor3D; k: Tensor3D; v: Tensor3D } {
  const c = model.config;
  const rows = h.shape[0];
  const [qOut, kOut, vOut] = linears(tf, model, layer, weights, ['q_proj', 'k_proj', 'v_proj'], h) as [
    Tensor2D,
    Tensor2D,
    Tensor2D,
  ];
  let q: Tensor = tf.reshape(qOut, [rows, c.headCount, c.headDimension]);
  let k: Tensor = tf.reshape(kOut, [rows, c.keyValueHeadCount, c.headDimension]);
  const v = tf.reshape(vOut, [rows, c.keyValueHeadCount, c.headDimension]);
  if (weights.queryNorm) q = rmsNorm(tf, q, weights.queryNorm, c.rmsNormEpsilon);
  if (weights.keyNorm) k = rmsNorm(tf, k, weights.keyNorm, c.rmsNormEpsilon);
  return { q: rotate(tf, q, rotary), k: rotate(tf, k, rotary), v: v as Tensor3D };
}

function mlp(tf: TensorFlow, model: RunnableModel, layer: number, weights: LayerTensors, x: Tensor2D): Tensor2D {
  const h = rmsNorm(tf, x, weights.postAttentionNorm, model.config.rmsNormEpsilon) as Tensor2D;
  const [gate, up] = linears(tf, model, layer, weights, ['gate_proj', 'up_proj'], h) as [Tensor2D, Tensor2D];
  const activated = tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as Tensor2D;
  return linears(tf, model, layer, weights, ['down_proj'], activated)[0] as Tensor2D;
}

/**
 * Key/value cache of every layer, the built-in models' {@link KeyValueCache} shape with keys stored
 * transposed, `[batch * kvHeads, headDim, t]`, values as `[batch * kvHeads, t, headDim]`, each a
 * list of segments in key order (the prompt, then blocks of generated tokens; only the last block
 * is copied when a token is appended).
 */
export type HfKeyValueCache = KeyValueCache;

/**
 * Most matrices of a batched product done one by one. The wasm backend hands only plain 2-D
 * products to XNNPACK; a batched one runs a naive loop ~10x slower. Splitting copies the whole
 * input once per matrix (its `slice` reads all of it), so past this many the loop is cheaper.
 */
const HEADWISE_MAX = 32;

/** `a · b` for `a` `[n, m, k]` and `b` `[n, k, p]`, as `n` plain products when `n` is small. */
function batchedProduct(tf: TensorFlow, a: Tensor3D, b: Tensor3D): Tensor3D {
  const n = a.shape[0];
  if (n > HEADWISE_MAX) return tf.matMul(a, b);
  const [, m, k] = a.shape;
  const p = b.shape[2];
  const left = n === 1 ? [a] : tf.split(a, n, 0);
  const right = n === 1 ? [b] : tf.split(b, n, 0);
  const products = left.map((part, index) =>
    tf.reshape(
      tf.matMul(tf.reshape(part, [m, k]) as Tensor2D, tf.reshape(right[index] as Tensor3D, [k, p]) as Tensor2D),
      [1, m, p],
    ),
  );
  return (n === 1 ? products[0] : tf.concat(products, 0)) as Tensor3D;
}

/** Causal mask `[groups * length, length]` for queries laid out group-major. */
function causalMask(tf: TensorFlow, groups: number, length: number): Tensor2D {
  const values = new Float32Array(groups * length * length);
  for (let group = 0; group < groups; group += 1)
    for (let row = 0; row < length; row += 1)
      for (let column = row + 1; column < length; column += 1) values[(group * length + row) * length + column] = -1e9;
  return tf.tensor2d(values, [groups * length, length]);
}

/** What a block's forward pass needs besides its weights and input. */
interface BlockContext {
  readonly batch: number;
  readonly length: number;
  readonly rotary: Rotary;
  /** Causal mask `[groups * length, length]`. */
  readonly mask: Tensor2D;
  /** When given, the block's keys and values are kept into it. */
  readonly cache?: HfKeyValueCache | undefined;
}

/** One block (attention and MLP, each with its residual) over `x` `[batch * length, hidden]`. */
function blockForward(
  tf: TensorFlow,
  model: RunnableModel,
  layer: number,
  weights: LayerTensors,
  x: Tensor2D,
  context: BlockContext,
): Tensor2D {
  const c = model.config;
  const { batch, length, rotary, mask, cache } = context;
  const groups = c.headCount / c.keyValueHeadCount;
  const h = rmsNorm(tf, x, weights.inputNorm, c.rmsNormEpsilon) as Tensor2D;
  const { q, k, v } = projectQkv(tf, model, layer, weights, h, rotary);
  // [batch, length, heads, d] -> [batch, kv, groups, length, d] -> [batch * kv, groups * length, d]:
  // query head h uses key/value head floor(h / groups), so no key or value is repeated.
  const queries = tf.reshape(tf.transpose(tf.reshape(q, [batch, length, c.headCount, c.headDimension]), [0, 2, 1, 3]), [
    batch * c.keyValueHeadCount,
    groups * length,
    c.headDimension,
  ]) as Tensor3D;
  const toKv = (t: Tensor3D): Tensor3D =>
    tf.reshape(tf.transpose(tf.reshape(t, [batch, length, c.keyValueHeadCount, c.headDimension]), [0, 2, 1, 3]), [
      batch * c.keyValueHeadCount,
      length,
      c.headDimension,
    ]) as Tensor3D;
  const keys = transposeLast(tf, toKv(k)) as Tensor3D;
  const values = toKv(v);
  if (cache) {
    cache.keys.push([tf.keep(keys)]);
    cache.values.push([tf.keep(values)]);
  }
  const scores = tf.add(tf.mul(batchedProduct(tf, queries, keys), 1 / Math.sqrt(c.headDimension)), mask);
  const attended = batchedProduct(tf, tf.softmax(scores) as Tensor3D, values);
  const merged = tf.reshape(
    tf.transpose(tf.reshape(attended, [batch, c.headCount, length, c.headDimension]), [0, 2, 1, 3]),
    [batch * length, c.headCount * c.headDimension],
  ) as Tensor2D;
  const attentionOut = tf.add(x, linears(tf, model, layer, weights, ['o_proj'], merged)[0] as Tensor2D) as Tensor2D;
  return tf.add(attentionOut, mlp(tf, model, layer, weights, attentionOut)) as Tensor2D;
}

/** A block over `x` with its weights uploaded from host memory for the call and freed after it. */
function uploadedBlock(
  tf: TensorFlow,
  model: RunnableModel,
  layer: number,
  source: HostLayer,
  x: Tensor2D,
  context: BlockContext,
): Tensor2D {
  const { weights, release } = layerTensors(tf, source);
  try {
    return blockForward(tf, model, layer, weights, x, context);
  } finally {
    release();
  }
}

/**
 * `tf.grads(f)(xs, dy)` called from within a backward pass. tfjs keeps the tape of the pass being
 * differentiated in its engine's state and drops it when a nested `grads` ends (nothing else nests
 * one inside a gradient function), after which the outer pass fails on a null tape: it is set
 * aside and put back.
 */
function gradientsWithin(tf: TensorFlow, f: (...xs: Tensor[]) => Tensor, xs: Tensor[], dy: Tensor): Tensor[] {
  const state = (tf.engine() as unknown as { state: { activeTape: unknown } }).state;
  const outer = state.activeTape;
  try {
    return tf.grads(f)(xs, dy);
  } finally {
    state.activeTape = outer;
  }
}

/**
 * A block whose weights live in host memory, for training (gradient checkpointing). The forward
 * pass uploads the block's weights, computes its output and frees everything else: the pass keeps
 * only the block's input. The backward pass uploads the weights again, recomputes the block and
 * takes its gradients (to the input and to the block's LoRA matrices) with the recomputed
 * intermediates, freed before the next block. A pass so holds one block's weights and
 * intermediates at a time, plus one `[tokens, hidden]` input per block.
 */
function checkpointedBlock(
  tf: TensorFlow,
  model: RunnableModel,
  layer: number,
  source: HostLayer,
  x: Tensor2D,
  context: BlockContext,
): Tensor2D {
  const adapters = Object.values(model.lora?.layers[layer] ?? {}).flatMap((pair) => (pair ? [pair.a, pair.b] : []));
  const { batch, length } = context;
  const checkpoint = tf.customGrad((...inputs) => {
    const save = inputs[inputs.length - 1] as (tensors: Tensor[]) => void;
    const input = inputs[0] as Tensor2D;
    // The rotary tables and the mask are the pass's, freed after its forward: the backward keeps its own.
    const { cos, sin, turn } = context.rotary;
    save([input, cos, sin, turn, context.mask]);
    return {
      value: uploadedBlock(tf, model, layer, source, input, context),
      gradFunc: (dy: Tensor, saved: Tensor[]) => {
        const [savedInput, savedCos, savedSin, savedTurn, savedMask] = saved as [
          Tensor2D,
          Tensor,
          Tensor,
          Tensor2D,
          Tensor2D,
        ];
        const rotary: Rotary = { cos: savedCos, sin: savedSin, turn: savedTurn };
        // The weights stay up until the block's backward pass has used them. The adapters are read
        // from the model inside the block: the same tensors as the differentiated inputs.
        const { weights, release } = layerTensors(tf, source);
        try {
          return gradientsWithin(
            tf,
            (again) =>
              blockForward(tf, model, layer, weights, again as Tensor2D, { batch, length, rotary, mask: savedMask }),
            [savedInput, ...adapters],
            dy,
          );
        } finally {
          release();
        }
      },
    };
  });
  return checkpoint(x, ...adapters) as Tensor2D;
}

/**
 * The blocks over embedded tokens `[batch * length, hidden]` at `positions` (per row and token);
 * returns the final normed hidden states `[batch * length, hidden]`. With `cache`, each layer's
 * keys and values are kept into it. Blocks held in host memory are uploaded one at a time (and,
 * without a cache, checkpointed: see {@link checkpointedBlock}).
 */
function hiddenStates(
  tf: TensorFlow,
  model: RunnableModel,
  embedded: Tensor2D,
  batch: number,
  length: number,
  positions: Int32Array,
  cache?: HfKeyValueCache,
): Tensor2D {
  const c = model.config;
  const groups = c.headCount / c.keyValueHeadCount;
  const context: BlockContext = {
    batch,
    length,
    rotary: rotaryOf(tf, model, positions),
    mask: causalMask(tf, groups, length),
    cache,
  };
  let x = embedded;
  for (let layer = 0; layer < c.layerCount; layer += 1) {
    const source = model.base.layers[layer] as LayerTensors | HostLayer;
    if (!cache) {
      x = isHostLayer(source)
        ? checkpointedBlock(tf, model, layer, source, x, context)
        : blockForward(tf, model, layer, source, x, context);
      continue;
    }
    // Sampling keeps nothing of a layer but its output and cache: a long batched prefill's
    // intermediates, all kept to the end of the pass, would outgrow the heap of a 0.6B model.
    const input = x;
    x = tf.tidy(() =>
      isHostLayer(source)
        ? uploadedBlock(tf, model, layer, source, input, context)
        : blockForward(tf, model, layer, source, input, context),
    );
    if (input !== embedded) input.dispose();
  }
  return rmsNorm(tf, x, model.base.finalNorm, c.rmsNormEpsilon) as Tensor2D;
}

/** The output projection (`[vocabulary, hidden]` in blocks of rows, the embedding itself when tied). */
function project(tf: TensorFlow, model: RunnableModel, hidden: Tensor2D): Tensor2D {
  return frozenProduct(tf, model.base.output, hidden);
}

/**
 * Differentiable forward pass: next-token logits for right-padded token ids `[batch, length]`
 * (row-major), at the flat `selected` positions only (`[selected.length, vocabulary]`). `offsets`
 * are the rows' first positions (default 0).
 */
export function forwardLogits(
  tf: TensorFlow,
  model: RunnableModel,
  tokens: Int32Array,
  batch: number,
  length: number,
  selected?: Int32Array,
  offsets?: readonly number[],
): Tensor2D {
  const positions = Int32Array.from(
    { length: batch * length },
    (_, index) => (offsets?.[Math.floor(index / length)] ?? 0) + (index % length),
  );
  const embedded = tf.tensor2d(embedRows(model, tokens), [batch * length, model.config.hiddenSize]);
  const hidden = hiddenStates(tf, model, embedded, batch, length, positions);
  return project(tf, model, selected ? (tf.gather(hidden, tf.tensor1d(selected, 'int32')) as Tensor2D) : hidden);
}

/** Most logits (positions × vocabulary) one chunk of {@link forwardTokenLogprobs} holds: 16 MB a copy. */
export const LOGITS_PER_CHUNK = 4 * 1024 * 1024;

/**
 * The target log-probabilities and entropies of rows of final hidden states `hidden`
 * `[positions, hidden]`, a chunk of positions at a time (at most {@link LOGITS_PER_CHUNK} logits):
 * no pass holds all positions' logits. The forward pass keeps only `hidden`; the backward pass
 * recomputes each chunk's logits and multiplies `dy · (onehot(target) - softmax)` by the output
 * projection, chunk by chunk. The same operations as the log-softmax of whole logits, row by row.
 */
function chunkedScores(
  tf: TensorFlow,
  output: readonly FrozenMatrix[],
  hidden: Tensor2D,
  targets: Int32Array,
  vocabulary: number,
  logitsPerChunk: number,
): TokenScores {
  const count = hidden.shape[0];
  const chunk = Math.max(1, Math.floor(logitsPerChunk / vocabulary));
  const chunks: { start: number; size: number }[] = [];
  for (let start = 0; start < count; start += chunk) chunks.push({ start, size: Math.min(chunk, count - start) });
  const rowsOf = (h: Tensor2D, start: number, size: number): Tensor2D =>
    size === count ? h : (tf.slice(h, [start, 0], [size, -1]) as Tensor2D);
  const logprobsOf = (h: Tensor2D, start: number, size: number): Tensor2D =>
    tf.logSoftmax(frozenProduct(tf, output, rowsOf(h, start, size))) as Tensor2D;
  const oneHot = (start: number, size: number): Tensor2D =>
    tf.oneHot(tf.tensor1d(targets.subarray(start, start + size), 'int32'), vocabulary) as Tensor2D;
  let entropy: Tensor1D | null = null;
  const head = tf.customGrad((...inputs) => {
    const h = inputs[0] as Tensor2D;
    (inputs[1] as (tensors: Tensor[]) => void)([h]);
    const parts = chunks.map(({ start, size }) =>
      tf.tidy(() => {
        const scores = targetScores(tf, logprobsOf(h, start, size), targets.subarray(start, start + size), vocabulary);
        return [scores.logprobs, scores.entropy] as [Tensor1D, Tensor1D];
      }),
    );
    const join = (tensors: Tensor1D[]): Tensor1D =>
      tensors.length === 1 ? (tensors[0] as Tensor1D) : tf.concat(tensors);
    entropy = tf.keep(join(parts.map((part) => part[1])));
    return {
      value: join(parts.map((part) => part[0])),
      gradFunc: (dy: Tensor, saved: Tensor[]) => {
        const savedHidden = saved[0] as Tensor2D;
        const gradients = chunks.map(({ start, size }) =>
          tf.tidy(() => {
            const probabilities = tf.exp(logprobsOf(savedHidden, start, size));
            const upstream = tf.reshape(size === count ? dy : tf.slice(dy, [start], [size]), [size, 1]);
            const logitGradient = tf.mul(upstream, tf.sub(oneHot(start, size), probabilities)) as Tensor2D;
            return weightTimes(tf, logitGradient, output);
          }),
        );
        return gradients.length === 1 ? (gradients[0] as Tensor2D) : tf.concat(gradients, 0);
      },
    };
  });
  const logprobs = head(hidden) as Tensor1D;
  return { logprobs, entropy: entropy as unknown as Tensor1D };
}

/**
 * Differentiable training pass: for right-padded token ids `[batch, length]` (row-major), the
 * log-probability of `targets[i]` after flat position `selected[i]`, and the entropy there,
 * without holding every selected position's logits at once (see {@link chunkedScores}). `offsets`
 * are the rows' first positions; `logitsPerChunk` bounds a chunk (tests make it small).
 */
export function forwardTokenLogprobs(
  tf: TensorFlow,
  model: RunnableModel,
  tokens: Int32Array,
  batch: number,
  length: number,
  selected: Int32Array,
  targets: Int32Array,
  offsets?: readonly number[],
  logitsPerChunk = LOGITS_PER_CHUNK,
): TokenScores {
  const positions = Int32Array.from(
    { length: batch * length },
    (_, index) => (offsets?.[Math.floor(index / length)] ?? 0) + (index % length),
  );
  const embedded = tf.tensor2d(embedRows(model, tokens), [batch * length, model.config.hiddenSize]);
  const hidden = hiddenStates(tf, model, embedded, batch, length, positions);
  const rows = tf.gather(hidden, tf.tensor1d(selected, 'int32')) as Tensor2D;
  return chunkedScores(tf, model.base.output, rows, targets, model.config.vocabularySize, logitsPerChunk);
}

/** The embedding rows of `tokens`, `[tokens, hidden]` row-major, looked up on the host. */
export function embedRows(model: Pick<RunnableModel, 'config' | 'base'>, tokens: ArrayLike<number>): Float32Array {
  const d = model.config.hiddenSize;
  const out = new Float32Array(tokens.length * d);
  const embedding = model.base.hostEmbedding;
  for (let index = 0; index < tokens.length; index += 1) {
    const id = tokens[index] as number;
    if (embedding instanceof Float32Array) out.set(embedding.subarray(id * d, (id + 1) * d), index * d);
    else widenBfloat16(embedding.subarray(id * d, (id + 1) * d), out, index * d);
  }
  return out;
}

/**
 * Runs right-padded prompts `[batch, length]` (true lengths in `lengths`) and returns the logits
 * of each row's last prompt token `[batch, vocabulary]` and the filled cache. Call inside
 * `tf.tidy`; the cache tensors are kept and must be disposed by the caller.
 */
export function prefill(
  tf: TensorFlow,
  model: RunnableModel,
  tokens: Int32Array,
  batch: number,
  length: number,
  lengths: readonly number[],
): { logits: Tensor2D; cache: HfKeyValueCache } {
  const cache: HfKeyValueCache = { keys: [], values: [] };
  const positions = Int32Array.from({ length: batch * length }, (_, index) => index % length);
  const embedded = tf.tensor2d(embedRows(model, tokens), [batch * length, model.config.hiddenSize]);
  const hidden = hiddenStates(tf, model, embedded, batch, length, positions, cache);
  return { logits: project(tf, model, lastPromptRows(tf, hidden, length, lengths)), cache };
}

/**
 * One decoding step: `tokens[row]` at `positions[row]`, attending over the cache plus itself.
 * `keyMask` is `[batch, cacheLength + 1]` of 0 (visible) or -1e9. Returns the next logits
 * `[batch, vocabulary]` and the grown cache (kept; the caller disposes what it replaced).
 */
export function decodeStep(
  tf: TensorFlow,
  model: RunnableModel,
  cache: HfKeyValueCache,
  tokens: readonly number[],
  positions: Int32Array,
  keyMask: Float32Array,
): { logits: Tensor2D; cache: HfKeyValueCache } {
  const c = model.config;
  const batch = tokens.length;
  const groups = c.headCount / c.keyValueHeadCount;
  const rotary = rotaryOf(tf, model, positions);
  const keyLength = keyMask.length / batch;
  const mask = tf.tensor3d(keyMask, [batch, 1, keyLength]);
  const scale = 1 / Math.sqrt(c.headDimension);
  const next: HfKeyValueCache = { keys: [], values: [] };
  let x = tf.tensor2d(embedRows(model, tokens), [batch, c.hiddenSize]);
  for (let layer = 0; layer < c.layerCount; layer += 1) {
    const { weights, release } = layerTensors(tf, model.base.layers[layer] as LayerTensors | HostLayer);
    const h = rmsNorm(tf, x, weights.inputNorm, c.rmsNormEpsilon) as Tensor2D;
    const { q, k, v } = projectQkv(tf, model, layer, weights, h, rotary);
    const rowsKv = batch * c.keyValueHeadCount;
    const query = tf.reshape(q, [rowsKv, groups, c.headDimension]) as Tensor3D;
    const newKey = tf.reshape(k, [rowsKv, c.headDimension, 1]) as Tensor3D;
    const newValue = tf.reshape(v, [rowsKv, 1, c.headDimension]) as Tensor3D;
    // Keys are stored transposed: they grow along axis 2.
    const keys = growSegments(tf, cache.keys[layer] as Tensor3D[], newKey, 2);
    const values = growSegments(tf, cache.values[layer] as Tensor3D[], newValue, 1);
    next.keys.push(keys);
    next.values.push(values);
    const parts = keys.map((segment) => tf.matMul(query, segment));
    const joined = parts.length === 1 ? (parts[0] as Tensor3D) : tf.concat(parts, 2);
    const scores = tf.add(tf.reshape(tf.mul(joined, scale), [batch, c.headCount, keyLength]), mask);
    const weightsAll = tf.reshape(tf.softmax(scores), [rowsKv, groups, keyLength]) as Tensor3D;
    const merged = tf.reshape(attendSegments(tf, weightsAll, values), [
      batch,
      c.headCount * c.headDimension,
    ]) as Tensor2D;
    x = tf.add(x, linears(tf, model, layer, weights, ['o_proj'], merged)[0] as Tensor2D);
    x = tf.add(x, mlp(tf, model, layer, weights, x));
    release();
  }
  const hidden = rmsNorm(tf, x, model.base.finalNorm, c.rmsNormEpsilon) as Tensor2D;
  return { logits: project(tf, model, hidden), cache: next };
}

/** Disposes every tensor of a cache. */
export const disposeHfCache: (cache: HfKeyValueCache) => void = disposeCache;

/**
 * The cache rows of the given sequences, in order (each sequence owns `kvHeads` consecutive rows).
 * Not shared with the built-in models' `selectCacheRows`: that one copies `headCount` rows per
 * sequence through host memory, this one gathers on the backend.
 */
export function selectHfCacheRows(
  tf: TensorFlow,
  model: RunnableModel,
  cache: HfKeyValueCache,
  rows: readonly number[],
): HfKeyValueCache {
  const heads = model.config.keyValueHeadCount;
  const indices = rows.flatMap((row) => Array.from({ length: heads }, (_, head) => row * heads + head));
  return tf.tidy(() => {
    const index = tf.tensor1d(Int32Array.from(indices), 'int32');
    const pick = (layers: Tensor3D[][]): Tensor3D[][] =>
      layers.map((segments) => segments.map((segment) => tf.keep(tf.gather(segment, index) as Tensor3D)));
    return { keys: pick(cache.keys), values: pick(cache.values) };
  });
}

/**
 * The decoder-only transformer: pre-norm blocks of causal multi-head attention and a GELU MLP,
 * learned absolute position embeddings, untied output projection.
 *
 * Two forward paths share the weights: {@link forwardLogits} over whole padded sequences (used by
 * training, differentiable: token embeddings are `matMul(oneHot(x), E)` because the wasm backend
 * has no gradient for `gather`), and the incremental path {@link prefill} + {@link decodeStep}
 * with a key/value cache (used by sampling).
 */
import type { Tensor, Tensor1D, Tensor2D, Tensor3D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from './tensorflow.js';
import { transposeLast } from './gradients.js';
import type { ModelConfig } from './model-config.js';

/** Weights as tensors, by parameter name. */
export type ParameterTensors = Readonly<Record<string, Tensor>>;

function parameter(parameters: ParameterTensors, name: string): Tensor {
  const tensor = parameters[name];
  if (!tensor) throw new Error(`Missing parameter ${name}.`);
  return tensor;
}

function layerNorm(tf: TensorFlow, x: Tensor, scale: Tensor, bias: Tensor): Tensor {
  const mean = tf.mean(x, -1, true);
  const centered = tf.sub(x, mean);
  const variance = tf.mean(tf.square(centered), -1, true);
  return tf.add(tf.mul(tf.mul(centered, tf.rsqrt(tf.add(variance, 1e-5))), scale), bias);
}

function gelu(tf: TensorFlow, x: Tensor): Tensor {
  // The sigmoid approximation of GELU: cheap, smooth, and differentiable with core ops.
  return tf.mul(x, tf.sigmoid(tf.mul(x, 1.702)));
}

function mlp(tf: TensorFlow, parameters: ParameterTensors, prefix: string, x: Tensor2D): Tensor2D {
  const h = layerNorm(
    tf,
    x,
    parameter(parameters, `${prefix}.mlp_norm.scale`),
    parameter(parameters, `${prefix}.mlp_norm.bias`),
  ) as Tensor2D;
  const up = gelu(
    tf,
    tf.add(
      tf.matMul(h, parameter(parameters, `${prefix}.mlp.up`) as Tensor2D),
      parameter(parameters, `${prefix}.mlp.up_bias`),
    ),
  ) as Tensor2D;
  return tf.add(
    tf.matMul(up, parameter(parameters, `${prefix}.mlp.down`) as Tensor2D),
    parameter(parameters, `${prefix}.mlp.down_bias`),
  ) as Tensor2D;
}

/**
 * Per-layer attention keys and values, each layer a list of segments
 * `[batch * heads, segmentLength, headDimension]` in key order: the prompt, then blocks of
 * generated tokens. Only the last, growing block is copied when a token is appended (a concat
 * over the whole cache at every step was half the cost of a decoding step).
 */
export interface KeyValueCache {
  readonly keys: Tensor3D[][];
  readonly values: Tensor3D[][];
}

/** Generated tokens per cache block. */
const CACHE_BLOCK = 32;

/**
 * A cache layer's segments with `added` (kept) appended along the token `axis`: segment 0 is the
 * prompt; a generated block grows until it holds CACHE_BLOCK tokens, then a new one starts.
 */
export function growSegments(tf: TensorFlow, segments: readonly Tensor3D[], added: Tensor3D, axis: number): Tensor3D[] {
  const last = segments[segments.length - 1] as Tensor3D;
  if (segments.length > 1 && (last.shape[axis] as number) < CACHE_BLOCK)
    return [...segments.slice(0, -1), tf.keep(tf.concat([last, added], axis))];
  return [...segments, tf.keep(added)];
}

/**
 * Attention weights `[rows, queries, keyLength]` applied to a cache layer's value segments
 * `[rows, segmentLength, width]` (the weights split along the keys to match), summed.
 */
export function attendSegments(tf: TensorFlow, weights: Tensor3D, values: readonly Tensor3D[]): Tensor3D {
  const weightParts =
    values.length === 1
      ? [weights]
      : tf.split(
          weights,
          values.map((segment) => segment.shape[1]),
          2,
        );
  const attended = values.map((segment, index) => tf.matMul(weightParts[index] as Tensor3D, segment));
  return attended.length === 1 ? (attended[0] as Tensor3D) : (tf.addN(attended) as Tensor3D);
}

/**
 * Additive mask of sliding-window attention over blocks: `[blocks, window, 2 * window]`, where the
 * queries of block `b` see the keys of blocks `b - 1` and `b`. Query `i` (position `bW + i`) sees
 * key `j` (position `(b - 1)W + j`) when `i < j <= i + W`: itself and the `W - 1` tokens before it.
 */
function windowMask(blocks: number, window: number): Float32Array {
  const mask = new Float32Array(blocks * window * 2 * window).fill(-1e9);
  for (let block = 0; block < blocks; block += 1)
    for (let query = 0; query < window; query += 1)
      for (let key = Math.max(query + 1, block === 0 ? window : 0); key <= query + window; key += 1)
        mask[(block * window + query) * 2 * window + key] = 0;
  return mask;
}

/**
 * Sliding-window attention of `[batchHeads, length, headDimension]` queries, keys and values:
 * the sequence is cut into blocks of `window` (zero-padded at the end) and each block attends to
 * itself and the block before, so the cost grows with `length × 2·window` instead of `length²`.
 */
function windowedAttention(tf: TensorFlow, q: Tensor3D, k: Tensor3D, v: Tensor3D, window: number): Tensor3D {
  const [batchHeads, length, headDimension] = q.shape;
  const blocks = Math.ceil(length / window);
  const padded = blocks * window;
  const pad = (t: Tensor3D): Tensor3D =>
    padded === length ? t : tf.concat([t, tf.zeros([batchHeads, padded - length, headDimension])], 1);
  const toBlocks = (t: Tensor3D): Tensor => tf.reshape(pad(t), [batchHeads, blocks, window, headDimension]);
  const withPrevious = (t: Tensor3D): Tensor3D => {
    const current = toBlocks(t);
    // Block 0 has no block before it: it gets a copy of itself, which the mask hides.
    const previous =
      blocks === 1
        ? current
        : tf.concat(
            [
              tf.slice(current, [0, 0, 0, 0], [batchHeads, 1, window, headDimension]),
              tf.slice(current, [0, 0, 0, 0], [batchHeads, blocks - 1, window, headDimension]),
            ],
            1,
          );
    return tf.reshape(tf.concat([previous, current], 2), [batchHeads * blocks, 2 * window, headDimension]);
  };
  const queries = tf.reshape(toBlocks(q), [batchHeads * blocks, window, headDimension]) as Tensor3D;
  const keys = withPrevious(k);
  const values = withPrevious(v);
  const scores = tf.reshape(
    tf.mul(tf.matMul(queries, transposeLast(tf, keys) as Tensor3D), 1 / Math.sqrt(headDimension)),
    [batchHeads, blocks, window, 2 * window],
  );
  const masked = tf.add(scores, tf.tensor3d(windowMask(blocks, window), [blocks, window, 2 * window]));
  const weights = tf.reshape(tf.softmax(masked), [batchHeads * blocks, window, 2 * window]) as Tensor3D;
  const attended = tf.reshape(tf.matMul(weights, values), [batchHeads, padded, headDimension]) as Tensor3D;
  return padded === length
    ? attended
    : (tf.slice(attended, [0, 0, 0], [batchHeads, length, headDimension]) as Tensor3D);
}

/**
 * Runs the blocks over `[batch, length]` token ids and returns the final hidden states
 * `[batch * length, modelDimension]`. With `cache`, the layers' keys and values are pushed into it.
 */
function hiddenStates(
  tf: TensorFlow,
  config: ModelConfig,
  parameters: ParameterTensors,
  embedded: Tensor2D,
  batch: number,
  length: number,
  cache?: KeyValueCache,
): Tensor2D {
  const d = config.modelDimension;
  const heads = config.headCount;
  const headDimension = d / heads;
  const window = config.attentionWindow;
  const windowed = window !== undefined && window < length;
  // Causal mask: -1e9 above the diagonal. Right padding needs no extra mask: real tokens never
  // look ahead, and padded positions are never read.
  let mask: Tensor2D | null = null;
  if (!windowed) {
    const maskValues = new Float32Array(length * length);
    for (let row = 0; row < length; row += 1)
      for (let column = row + 1; column < length; column += 1) maskValues[row * length + column] = -1e9;
    mask = tf.tensor2d(maskValues, [length, length]);
  }
  let x = embedded;
  const toHeads = (t: Tensor2D): Tensor3D =>
    tf.reshape(tf.transpose(tf.reshape(t, [batch, length, heads, headDimension]), [0, 2, 1, 3]), [
      batch * heads,
      length,
      headDimension,
    ]);
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const prefix = `layers.${layer}`;
    const h = layerNorm(
      tf,
      x,
      parameter(parameters, `${prefix}.attention_norm.scale`),
      parameter(parameters, `${prefix}.attention_norm.bias`),
    ) as Tensor2D;
    const qkv = tf.matMul(h, parameter(parameters, `${prefix}.attention.qkv`) as Tensor2D);
    const [q, k, v] = tf.split(qkv, 3, 1) as [Tensor2D, Tensor2D, Tensor2D];
    const qh = toHeads(q);
    const kh = toHeads(k);
    const vh = toHeads(v);
    if (cache) {
      cache.keys.push([tf.keep(kh)]);
      cache.values.push([tf.keep(vh)]);
    }
    const attended =
      windowed || mask === null
        ? windowedAttention(tf, qh, kh, vh, window as number)
        : tf.matMul(
            tf.softmax(
              tf.add(tf.mul(tf.matMul(qh, transposeLast(tf, kh) as Tensor3D), 1 / Math.sqrt(headDimension)), mask),
            ),
            vh,
          );
    const merged = tf.reshape(tf.transpose(tf.reshape(attended, [batch, heads, length, headDimension]), [0, 2, 1, 3]), [
      batch * length,
      d,
    ]);
    x = tf.add(x, tf.matMul(merged as Tensor2D, parameter(parameters, `${prefix}.attention.output`) as Tensor2D));
    x = tf.add(x, mlp(tf, parameters, prefix, x));
  }
  return layerNorm(
    tf,
    x,
    parameter(parameters, 'final_norm.scale'),
    parameter(parameters, 'final_norm.bias'),
  ) as Tensor2D;
}

function project(tf: TensorFlow, parameters: ParameterTensors, hidden: Tensor2D): Tensor2D {
  return tf.add(tf.matMul(hidden, parameter(parameters, 'output') as Tensor2D), parameter(parameters, 'output_bias'));
}

/** Each position's target log-probability and the entropy of its next-token distribution. */
export interface TokenScores {
  /** `[positions]`, differentiable. */
  readonly logprobs: Tensor1D;
  /** `[positions]`, a metric: the loss does not depend on it. */
  readonly entropy: Tensor1D;
}

/**
 * The {@link TokenScores} of next-token log-probabilities `logprobs` `[positions, vocabulary]` (a
 * log-softmax of logits): the log-probability of `targets[i]` at row `i`, and each row's entropy.
 * The trainer's loss over whole logits and the chunked loss of real models both score with it.
 */
export function targetScores(tf: TensorFlow, logprobs: Tensor2D, targets: Int32Array, vocabulary: number): TokenScores {
  return {
    logprobs: tf.sum(tf.mul(logprobs, tf.oneHot(tf.tensor1d(targets, 'int32'), vocabulary)), -1) as Tensor1D,
    entropy: tf.neg(tf.sum(tf.mul(tf.exp(logprobs), logprobs), -1)) as Tensor1D,
  };
}

/**
 * Differentiable forward pass: next-token logits `[batch * length, vocabulary]` for right-padded
 * token ids `[batch, length]` (row-major, `Int32Array` of `batch * length`), or only at the
 * flat `positions` given (`[positions.length, vocabulary]`: the trainer projects only the tokens
 * it learns, which saves most of the output layer on long prompts). `offsets` are the rows' first
 * positions (a row cut at the front keeps its tokens' absolute positions); default 0.
 */
export function forwardLogits(
  tf: TensorFlow,
  config: ModelConfig,
  parameters: ParameterTensors,
  tokens: Int32Array,
  batch: number,
  length: number,
  positions?: Int32Array,
  offsets?: readonly number[],
): Tensor2D {
  if (length > config.contextLength)
    throw new Error(`Sequence of ${length} tokens exceeds the context of ${config.contextLength}.`);
  const ids = tf.tensor1d(tokens, 'int32');
  // A gather of rows (its gradient, registered in gradients.ts, adds rows back on the host).
  const tokenEmbedding = tf.gather(parameter(parameters, 'token_embedding') as Tensor2D, ids);
  const positionEmbedding = offsets?.some((offset) => offset > 0)
    ? tf.reshape(
        tf.gather(
          parameter(parameters, 'position_embedding') as Tensor2D,
          tf.tensor1d(
            Int32Array.from({ length: batch * length }, (_, index) =>
              // Padding past the context (never read) reuses the last position.
              Math.min(config.contextLength - 1, (offsets[Math.floor(index / length)] ?? 0) + (index % length)),
            ),
            'int32',
          ),
        ),
        [batch, length, config.modelDimension],
      )
    : tf.slice(parameter(parameters, 'position_embedding'), [0, 0], [length, config.modelDimension]);
  const embedded = tf.reshape(
    tf.add(tf.reshape(tokenEmbedding, [batch, length, config.modelDimension]), positionEmbedding),
    [batch * length, config.modelDimension],
  ) as Tensor2D;
  const hidden = hiddenStates(tf, config, parameters, embedded, batch, length);
  return project(tf, parameters, positions ? (tf.gather(hidden, tf.tensor1d(positions, 'int32')) as Tensor2D) : hidden);
}

/**
 * Runs the prompts (embedded, right-padded `[batch * length, modelDimension]`, true lengths in
 * `lengths`) and returns the logits of each row's last prompt token `[batch, vocabulary]` plus the
 * filled key/value cache. Call inside `tf.tidy`; the cache tensors are kept and must be disposed
 * by the caller.
 */
export function prefill(
  tf: TensorFlow,
  config: ModelConfig,
  parameters: ParameterTensors,
  embedded: Float32Array,
  batch: number,
  length: number,
  lengths: readonly number[],
): { logits: Tensor2D; cache: KeyValueCache } {
  const cache: KeyValueCache = { keys: [], values: [] };
  const input = tf.tensor2d(embedded, [batch * length, config.modelDimension]);
  const hidden = hiddenStates(tf, config, parameters, input, batch, length, cache);
  return { logits: project(tf, parameters, lastPromptRows(tf, hidden, length, lengths)), cache };
}

/** The rows of each prompt's last token in right-padded `[batch * length, width]` hidden states. */
export function lastPromptRows(tf: TensorFlow, hidden: Tensor2D, length: number, lengths: readonly number[]): Tensor2D {
  return tf.gather(
    hidden,
    tf.tensor1d(
      lengths.map((rowLength, row) => row * length + rowLength - 1),
      'int32',
    ),
  ) as Tensor2D;
}

/**
 * One decoding step for `[batch]` new tokens, given embedded (token + position,
 * `[batch * modelDimension]`), attending over the cache plus the new token. `keyMask` is
 * `[batch, cacheLength + 1]` of 0 (visible) or -1e9 (padding). Returns the next logits
 * `[batch, vocabulary]` and the grown cache (kept; the caller disposes the old one).
 */
export function decodeStep(
  tf: TensorFlow,
  config: ModelConfig,
  parameters: ParameterTensors,
  cache: KeyValueCache,
  embedded: Float32Array,
  batch: number,
  keyMask: Float32Array,
): { logits: Tensor2D; cache: KeyValueCache } {
  const d = config.modelDimension;
  const heads = config.headCount;
  const headDimension = d / heads;
  const next: KeyValueCache = { keys: [], values: [] };
  let x = tf.tensor2d(embedded, [batch, d]);
  const keyLength = keyMask.length / batch;
  const mask = tf.tensor4d(keyMask, [batch, 1, 1, keyLength]);
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const prefix = `layers.${layer}`;
    const h = layerNorm(
      tf,
      x,
      parameter(parameters, `${prefix}.attention_norm.scale`),
      parameter(parameters, `${prefix}.attention_norm.bias`),
    ) as Tensor2D;
    const [q, k, v] = tf.split(tf.matMul(h, parameter(parameters, `${prefix}.attention.qkv`) as Tensor2D), 3, 1) as [
      Tensor2D,
      Tensor2D,
      Tensor2D,
    ];
    const toHeads = (t: Tensor2D): Tensor3D => tf.reshape(t, [batch * heads, 1, headDimension]);
    const keys = growSegments(tf, cache.keys[layer] as Tensor3D[], toHeads(k), 1);
    const values = growSegments(tf, cache.values[layer] as Tensor3D[], toHeads(v), 1);
    next.keys.push(keys);
    next.values.push(values);
    const query = toHeads(q);
    const scoreParts = keys.map((segment) => tf.matMul(query, segment, false, true));
    const joined = scoreParts.length === 1 ? (scoreParts[0] as Tensor3D) : tf.concat(scoreParts, 2);
    const scores = tf.reshape(tf.mul(joined, 1 / Math.sqrt(headDimension)), [batch, heads, 1, keyLength]);
    const weights = tf.reshape(tf.softmax(tf.add(scores, mask)), [batch * heads, 1, keyLength]) as Tensor3D;
    const merged = tf.reshape(attendSegments(tf, weights, values), [batch, d]) as Tensor2D;
    x = tf.add(x, tf.matMul(merged, parameter(parameters, `${prefix}.attention.output`) as Tensor2D));
    x = tf.add(x, mlp(tf, parameters, prefix, x));
  }
  const hidden = layerNorm(
    tf,
    x,
    parameter(parameters, 'final_norm.scale'),
    parameter(parameters, 'final_norm.bias'),
  ) as Tensor2D;
  return { logits: project(tf, parameters, hidden), cache: next };
}

/**
 * Keeps only the given batch rows of a cache (new kept tensors; the caller disposes the old cache).
 * Copies through host memory: the wasm backend's gather is an order of magnitude slower here.
 */
export function selectCacheRows(
  tf: TensorFlow,
  config: ModelConfig,
  cache: KeyValueCache,
  rows: readonly number[],
): KeyValueCache {
  const heads = config.headCount;
  const select = (tensor: Tensor3D): Tensor3D => {
    const [batchHeads, length, headDimension] = tensor.shape;
    const block = heads * length * headDimension;
    const source = tensor.dataSync() as Float32Array;
    const target = new Float32Array(rows.length * block);
    rows.forEach((row, index) => target.set(source.subarray(row * block, (row + 1) * block), index * block));
    void batchHeads;
    return tf.keep(tf.tensor3d(target, [rows.length * heads, length, headDimension]));
  };
  return {
    keys: cache.keys.map((segments) => segments.map(select)),
    values: cache.values.map((segments) => segments.map(select)),
  };
}

/** Disposes a cache's tensors. */
export function disposeCache(cache: KeyValueCache): void {
  for (const tensor of [...cache.keys.flat(), ...cache.values.flat()]) tensor.dispose();
}

/** Disposes the tensors of `previous` that `next` no longer holds (after a decoding step). */
export function disposeReplaced(previous: KeyValueCache, next: KeyValueCache): void {
  const kept = new Set<Tensor3D>([...next.keys.flat(), ...next.values.flat()]);
  for (const tensor of [...previous.keys.flat(), ...previous.values.flat()]) if (!kept.has(tensor)) tensor.dispose();
}

/**
 * A real model's vocabulary can be taller than the blocks in which the backward pass copies the
 * output projection (`PROJECTION_BLOCK_ROWS`, 16,384; Qwen3 has 151,936): LoRA gradients
 * through such a projection must equal central finite differences, whichever block a learned
 * token's row falls in.
 */
import type { Tensor, Tensor2D } from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { parseHfConfig } from '../../src/engine/hf/config.js';
import { disposeBase, linearShape } from '../../src/engine/hf/files.js';
import { LINEAR_MODULES, PROJECTION_BLOCK_ROWS, forwardLogits, runnable } from '../../src/engine/hf/model.js';
import type { BaseTensors, LayerTensors, LinearModule } from '../../src/engine/hf/model.js';
import { SeededRandom } from '../../src/engine/random.js';

const vocabulary = 20_000;
const config = parseHfConfig({
  architectures: ['LlamaForCausalLM'],
  vocab_size: vocabulary,
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 4,
  max_position_embeddings: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10_000,
  tie_word_embeddings: true,
});
const tokens = Int32Array.from([3, 19_999, 16_400, 7, 12_000]);
// The loss reads a few logits, in both blocks of the projection's rows.
const readLogits: [position: number, id: number, weight: number][] = [
  [4, 5, 0.7],
  [4, 17_000, -1.3],
  [2, 19_999, 0.9],
  [1, 16_383, 1.1],
  [3, 16_384, -0.6],
];

let tf: TensorFlow;
let base: BaseTensors;
beforeAll(async () => {
  tf = await loadTensorFlow();
  const random = new SeededRandom(3);
  const values = (count: number, scale: number): Float32Array =>
    Float32Array.from({ length: count }, () => (random.next() * 2 - 1) * scale);
  const embedding = values(vocabulary * config.hiddenSize, 0.5);
  const linear = {} as Record<LinearModule, Tensor2D>;
  for (const module of LINEAR_MODULES) {
    const shape = linearShape(config, module);
    linear[module] = tf.tensor2d(values(shape[0] * shape[1], 0.4), shape);
  }
  const layer: LayerTensors = {
    inputNorm: tf.ones([config.hiddenSize]),
    postAttentionNorm: tf.ones([config.hiddenSize]),
    linear,
    bias: {},
  };
  base = {
    hostEmbedding: embedding,
    output: [0, PROJECTION_BLOCK_ROWS].map((start) => {
      const rows = Math.min(PROJECTION_BLOCK_ROWS, vocabulary - start);
      return tf.tensor2d(embedding.subarray(start * config.hiddenSize, (start + rows) * config.hiddenSize), [
        rows,
        config.hiddenSize,
      ]);
    }),
    finalNorm: tf.ones([config.hiddenSize]),
    layers: [layer],
  };
});
afterAll(() => disposeBase(base));

function loss(a: Tensor, b: Tensor): Tensor {
  const lora = { scale: 2, layers: [{ down_proj: { a: a as Tensor2D, b: b as Tensor2D } }] };
  const logits = forwardLogits(tf, runnable(config, base, lora), tokens, 1, tokens.length);
  const picked = tf.gather(
    tf.reshape(logits, [-1]),
    readLogits.map(([position, id]) => position * vocabulary + id),
  );
  return tf.sum(tf.mul(picked, tf.tensor1d(readLogits.map(([, , weight]) => weight))));
}

describe('a vocabulary taller than one backward block', () => {
  it('gives LoRA gradients equal to central finite differences', () => {
    const random = new SeededRandom(11);
    const a = Float32Array.from({ length: 12 * 2 }, () => random.next() - 0.5);
    const b = Float32Array.from({ length: 2 * 8 }, () => random.next() - 0.5);
    const value = (aData: Float32Array, bData: Float32Array): number =>
      tf.tidy(() => loss(tf.tensor2d(aData, [12, 2]), tf.tensor2d(bData, [2, 8])).dataSync()[0] as number);
    const [gradA, gradB] = tf.tidy(() =>
      tf
        .grads(loss)([tf.tensor2d(a, [12, 2]), tf.tensor2d(b, [2, 8])])
        .map((g) => g.dataSync() as Float32Array),
    ) as [Float32Array, Float32Array];
    const step = 1e-2;
    const checks: [Float32Array, Float32Array, number][] = [
      [a, gradA, 0],
      [a, gradA, 13],
      [a, gradA, 23],
      [b, gradB, 0],
      [b, gradB, 9],
      [b, gradB, 15],
    ];
    for (const [data, gradient, index] of checks) {
      const plus = Float32Array.from(data);
      const minus = Float32Array.from(data);
      plus[index] = (plus[index] as number) + step;
      minus[index] = (minus[index] as number) - step;
      const numeric =
        data === a ? (value(plus, b) - value(minus, b)) / (2 * step) : (value(a, plus) - value(a, minus)) / (2 * step);
      expect(Math.abs(numeric)).toBeGreaterThan(1e-3);
      expect(gradient[index]).toBeCloseTo(numeric, 3);
    }
  });
});

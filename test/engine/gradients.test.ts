/**
 * Gradient sanity of the hand-registered gradients (`src/engine/gradients.ts`): the gradient of
 * the training losses through the whole transformer matches central finite differences.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Scalar, Tensor, Tensor1D } from '@tensorflow/tfjs-core';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import type { ModelConfig } from '../../src/engine/model-config.js';
import { SeededRandom } from '../../src/engine/random.js';
import { forwardLogits } from '../../src/engine/transformer.js';
import { initialWeights, parameterSpecs } from '../../src/engine/weights.js';
import type { HostWeights } from '../../src/engine/weights.js';

const config: ModelConfig = {
  id: 'test/grad',
  vocabularySize: 11,
  contextLength: 6,
  modelDimension: 8,
  layerCount: 2,
  headCount: 2,
  feedForwardDimension: 12,
  seed: 5,
};
const batch = 2;
const length = 5;
const random = new SeededRandom(9);
const tokens = Int32Array.from({ length: batch * length }, () => Math.floor(random.next() * config.vocabularySize));
const targets = Int32Array.from({ length: batch * length }, () => Math.floor(random.next() * config.vocabularySize));
const advantages = Float32Array.from({ length: batch * length }, () => random.next() * 2 - 1);
const oldLogprobs = Float32Array.from({ length: batch * length }, () => -2.4 + (random.next() - 0.5) * 0.6);

let tf: TensorFlow;
beforeAll(async () => {
  tf = await loadTensorFlow();
});

type Loss = (tokenLogprobs: Tensor1D) => Tensor;
const losses: Record<string, () => Loss> = {
  'cross-entropy (SFT)': () => (logprobs) => tf.neg(tf.mean(logprobs)),
  'PPO clipped objective (RL)': () => (logprobs) => {
    const ratio = tf.exp(tf.sub(logprobs, tf.tensor1d(oldLogprobs)));
    const weighted = tf.tensor1d(advantages);
    return tf.neg(tf.sum(tf.minimum(tf.mul(ratio, weighted), tf.mul(tf.clipByValue(ratio, 0.9, 1.1), weighted))));
  },
};

function lossOf(weights: HostWeights, loss: Loss): { value: number; gradients: Map<string, Float32Array> } {
  const names = parameterSpecs(config).map((spec) => spec.name);
  const parameters = names.map((name) => {
    const tensor = weights.get(name) as { shape: readonly number[]; data: Float32Array };
    return tf.tensor(tensor.data, [...tensor.shape]);
  });
  const { value, grads } = tf.valueAndGrads((...inputs: Tensor[]) => {
    const logits = forwardLogits(
      tf,
      config,
      Object.fromEntries(names.map((name, index) => [name, inputs[index] as Tensor])),
      tokens,
      batch,
      length,
    );
    const tokenLogprobs = tf.sum(
      tf.mul(tf.logSoftmax(logits), tf.oneHot(tf.tensor1d(targets, 'int32'), config.vocabularySize)),
      -1,
    ) as Tensor1D;
    return loss(tokenLogprobs) as Scalar;
  })(parameters);
  const result = {
    value: value.dataSync()[0] as number,
    gradients: new Map(names.map((name, index) => [name, (grads[index] as Tensor).dataSync() as Float32Array])),
  };
  for (const tensor of [value, ...grads, ...parameters]) tensor.dispose();
  return result;
}

describe('gradients', () => {
  for (const [label, makeLoss] of Object.entries(losses)) {
    it(`match finite differences for the ${label}, in every parameter`, () => {
      const loss = makeLoss();
      const weights = initialWeights(config);
      // Larger output weights than the near-uniform init, so that every path carries gradient.
      for (const [name, tensor] of weights)
        if (name === 'output' || name.endsWith('attention.output') || name.endsWith('mlp.down'))
          tensor.data.forEach((value, index) => (tensor.data[index] = value * 20));
      const before = tf.memory().numTensors;
      const { gradients } = lossOf(weights, loss);
      const pick = new SeededRandom(3);
      let checked = 0;
      for (const spec of parameterSpecs(config)) {
        const data = (weights.get(spec.name) as { data: Float32Array }).data;
        const gradient = gradients.get(spec.name) as Float32Array;
        for (let sample = 0; sample < 3; sample += 1) {
          const index = Math.floor(pick.next() * data.length);
          const saved = data[index] as number;
          const step = 1e-2;
          data[index] = saved + step;
          const plus = lossOf(weights, loss).value;
          data[index] = saved - step;
          const minus = lossOf(weights, loss).value;
          data[index] = saved;
          const numeric = (plus - minus) / (2 * step);
          const analytic = gradient[index] as number;
          expect(
            Math.abs(numeric - analytic),
            `${spec.name}[${index}]: finite difference ${numeric}, gradient ${analytic}`,
          ).toBeLessThan(2e-3 + 0.05 * Math.abs(numeric));
          checked += 1;
        }
      }
      expect(checked).toBe(parameterSpecs(config).length * 3);
      // Some gradient is far from zero (the check is not vacuous).
      const largest = Math.max(...[...gradients.values()].map((values) => Math.max(...Array.from(values, Math.abs))));
      expect(largest).toBeGreaterThan(0.05);
      expect(tf.memory().numTensors).toBe(before);
    });
  }
});

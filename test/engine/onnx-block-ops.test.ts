/**
 * The onnxruntime forward pass built from `block-ops.ts` against the tfjs model on the committed
 * reference models (Llama and Qwen3 with q/k norms, tied and untied, GQA), with a PEFT adapter, on
 * ragged right-padded rows with per-row offsets.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { disposeLora, readAdapter, uploadLora } from '../../src/engine/hf/lora.js';
import { forwardLogits, runnable } from '../../src/engine/hf/model.js';
import type { BaseTensors } from '../../src/engine/hf/model.js';
import type { HfModelConfig } from '../../src/engine/hf/config.js';
import { OnnxForward, onnxBaseOf } from '../../src/engine/onnx/onnx-model.js';
import { REFERENCE_FIXTURES, REFERENCE_MODELS, useReferenceModels } from './support/reference-models.js';

const FIXTURES = REFERENCE_FIXTURES;
const MODELS = REFERENCE_MODELS;
const models = useReferenceModels();
const { loaded } = models;
let tf: TensorFlow;
beforeAll(() => {
  tf = models.tf;
});

describe.each(MODELS)('%s on onnxruntime', (name) => {
  it('gives the tfjs logits with a PEFT adapter on ragged rows with offsets', async () => {
    const { config, base } = loaded.get(name) as { config: HfModelConfig; base: BaseTensors };
    const adapter = await readAdapter(path.join(FIXTURES, 'lora', name, 'adapter'), config);
    const batch = 3;
    const length = 7;
    const tokens = Int32Array.from({ length: batch * length }, (_, index) => (index * 37 + 11) % config.vocabularySize);
    // Row 1 is shorter (padding 0 after 4 tokens); row 2 starts at position 5.
    for (let t = 4; t < length; t += 1) tokens[length + t] = 0;
    const offsets = [0, 0, 5];
    const selected = Int32Array.from([0, 3, 6, 7, 10, 14, 20]);
    const lora = uploadLora(tf, config, adapter.settings, adapter.weights);
    const expected = tf.tidy(() =>
      forwardLogits(tf, runnable(config, base, lora), tokens, batch, length, selected, offsets),
    );
    const want = expected.dataSync() as Float32Array;
    expected.dispose();
    disposeLora(lora);
    const model = await OnnxForward.create(onnxBaseOf(config, base), adapter.settings);
    const got = await model.forwardLogits(tokens, batch, length, adapter.weights, selected, offsets);
    expect(got.positions).toBe(selected.length);
    let max = 0;
    let largest = 0;
    want.forEach((value, index) => {
      max = Math.max(max, Math.abs(value - (got.data[index] as number)));
      largest = Math.max(largest, Math.abs(value));
    });
    expect(largest).toBeGreaterThan(0.1);
    expect(max).toBeLessThan(1e-4);
  });
});

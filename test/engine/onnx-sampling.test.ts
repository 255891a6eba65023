/**
 * Sampling on onnxruntime against transformers and against the tfjs sampler, on the committed tiny
 * reference models (`test/fixtures/reference`): Llama and Qwen3, tied and untied, F32/BF16/F16 and
 * sharded weights. The prefill and decoding graphs give transformers' (and PEFT's) logits at every
 * position through the key/value cache; batched rows of different prompt lengths, rows that finish
 * at different steps and rows sharing a prompt sample the same tokens with the same logprobs as
 * the tfjs path, with and without a LoRA adapter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../src/engine/hf/files.js';
import { disposeLora, readAdapter, uploadLora } from '../../src/engine/hf/lora.js';
import type { LoraSettings } from '../../src/engine/hf/lora.js';
import { runnable } from '../../src/engine/hf/model.js';
import type { BaseTensors, LayerTensors, LinearModule } from '../../src/engine/hf/model.js';
import type { Tensor1D } from '@tensorflow/tfjs-core';
import type { HfModelConfig } from '../../src/engine/hf/config.js';
import { generateHf } from '../../src/engine/hf/sampler.js';
import { OnnxHfModel, generateHfOnnx, onnxLora, onnxStepDecoder } from '../../src/engine/onnx/onnx-sampler.js';
import type { OnnxLora } from '../../src/engine/onnx/onnx-sampler.js';
import { OnnxKeyValueCache } from '../../src/engine/onnx/onnx-cache.js';
import { SeededRandom } from '../../src/engine/random.js';
import type { GeneratedSequence, GenerationRow } from '../../src/engine/sampler.js';
import type { HostWeights } from '../../src/engine/weights.js';
import type { TextLayer } from '../../src/text/loader.js';
import { REFERENCE_FIXTURES, REFERENCE_MODELS } from './support/reference-models.js';

const FIXTURES = REFERENCE_FIXTURES;
const MODELS = REFERENCE_MODELS;
/** The bound the tfjs engine keeps against transformers' float32 logits. */
const LOGIT_TOLERANCE = 1e-4;
/** Sampled logprobs of the two runtimes (float32 sums in different orders). */
const LOGPROB_TOLERANCE = 1e-4;

interface Prompt {
  readonly name: string;
  readonly ids: number[];
  readonly logits: number[][];
}

const reference = JSON.parse(readFileSync(path.join(FIXTURES, 'logits.json'), 'utf8')) as {
  models: Record<string, { prompts: Prompt[] }>;
};
const text = { stopTokenIds: [], decode: () => '' } as unknown as TextLayer;

interface Loaded {
  readonly config: HfModelConfig;
  readonly base: BaseTensors;
  readonly onnx: OnnxHfModel;
  readonly adapter: { settings: LoraSettings; weights: HostWeights };
  readonly lora: OnnxLora;
}

let tf: TensorFlow;
const loaded = new Map<string, Loaded>();

beforeAll(async () => {
  tf = await loadTensorFlow();
  for (const name of MODELS) {
    const directory = path.join(FIXTURES, name);
    const config = await readHfConfig(directory);
    const base = await loadBaseTensors(tf, directory, config, 'heap');
    const adapter = await readAdapter(path.join(FIXTURES, 'lora', name, 'adapter'), config);
    loaded.set(name, {
      config,
      base,
      onnx: await OnnxHfModel.create(config, base, 1),
      adapter,
      lora: await onnxLora(config, adapter.settings, adapter.weights),
    });
  }
});
afterAll(async () => {
  for (const { base, onnx } of loaded.values()) {
    await onnx.release();
    disposeBase(base);
  }
});

function maxDifference(expected: readonly number[], actual: Float32Array): number {
  let max = 0;
  expected.forEach((value, index) => {
    max = Math.max(max, Math.abs(value - (actual[index] as number)));
  });
  return max;
}

/** Rows over the model's reference prompts (three lengths), each with its own budget and seed. */
function rowsOf(prompts: readonly Prompt[], temperature: number): GenerationRow[] {
  const chosen = prompts.slice(0, 3).map((prompt) => prompt.ids.slice(0, 12));
  // Budgets 9, 3, 6, 2, ...: rows finish at different steps, so the cache drops rows.
  return [...chosen, chosen[0] as number[], chosen[1] as number[]].map((prompt, index) => ({
    prompt,
    sampling: {
      temperature,
      topP: 1,
      maxTokens: [9, 3, 6, 2, 8][index] as number,
      stop: [],
      topLogprobs: 2,
      random: new SeededRandom(100 + index),
    },
  }));
}

function expectSameSamples(onnx: GeneratedSequence[], tfjs: GeneratedSequence[]): void {
  expect(onnx.map((sequence) => sequence.tokens)).toEqual(tfjs.map((sequence) => sequence.tokens));
  expect(onnx.map((sequence) => sequence.finishReason)).toEqual(tfjs.map((sequence) => sequence.finishReason));
  onnx.forEach((sequence, row) => {
    const expected = tfjs[row] as GeneratedSequence;
    sequence.logprobs.forEach((logprob, index) =>
      expect(Math.abs(logprob - (expected.logprobs[index] as number)), `row ${row} token ${index}`).toBeLessThan(
        LOGPROB_TOLERANCE,
      ),
    );
    sequence.alternatives.forEach((alternatives, index) =>
      expect(alternatives.map((alternative) => alternative.id)).toEqual(
        expected.alternatives[index]?.map((alternative) => alternative.id),
      ),
    );
  });
}

describe('the onnxruntime key/value cache', () => {
  /** A cache whose every value names its layer, row, head, lane and position. */
  function filled(rows: number, length: number, capacity: number, tag: number): OnnxKeyValueCache {
    const cache = new OnnxKeyValueCache(2, rows, 2, 3, capacity);
    for (let layer = 0; layer < 2; layer += 1) {
      const keys = new Float32Array(rows * 2 * 3 * length).map((_, index) => tag + layer * 1e5 + index);
      const values = keys.map((value) => -value);
      cache.writePositions(layer, 0, keys, values, length);
    }
    cache.length = length;
    return cache;
  }
  const held = (cache: OnnxKeyValueCache, layer: number, row: number): number[][] => {
    const { keys, values } = cache.buffers(layer);
    const lane = 2 * 3 * cache.capacity;
    const out: number[][] = [];
    for (let position = 0; position < cache.length; position += 1) {
      const at: number[] = [];
      for (let head = 0; head < 2; head += 1)
        for (let i = 0; i < 3; i += 1) {
          at.push(keys[row * lane + (head * 3 + i) * cache.capacity + position] as number);
          at.push(values[row * lane + (head * cache.capacity + position) * 3 + i] as number);
        }
      out.push(at);
    }
    return out;
  };

  it('keeps the held positions when it grows, and joins and selects rows by position', () => {
    const first = filled(2, 3, 3, 0);
    const before = [0, 1].map((row) => held(first, 1, row));
    first.reserve(5);
    expect(first.capacity).toBe(6);
    expect([0, 1].map((row) => held(first, 1, row))).toEqual(before);
    const second = filled(1, 3, 4, 1e7);
    const joined = OnnxKeyValueCache.join([first, second]);
    expect(joined.rows).toBe(3);
    expect(held(joined, 1, 0)).toEqual(before[0]);
    expect(held(joined, 1, 2)).toEqual(held(second, 1, 0));
    const picked = joined.selectRows([2, 0, 0]);
    expect([0, 1, 2].map((row) => held(picked, 0, row))).toEqual([
      held(second, 0, 0),
      held(first, 0, 0),
      held(first, 0, 0),
    ]);
  });
});

describe('attention biases on onnxruntime', () => {
  it('a Llama with q/k/v/o biases (attention_bias) samples the tfjs path’s tokens and logprobs', async () => {
    const { config, base, adapter, lora } = loaded.get('llama-untied') as Loaded;
    const biased: HfModelConfig = { ...config, attentionBias: true };
    const random = new SeededRandom(9);
    const biases: Tensor1D[] = [];
    const layers = base.layers.map((layer) => {
      const bias: Partial<Record<LinearModule, Tensor1D>> = {};
      for (const module of ['q_proj', 'k_proj', 'v_proj', 'o_proj'] as const) {
        const size = (layer.linear[module] as { shape: readonly number[] }).shape[0] as number;
        const tensor = tf.tensor1d(Float32Array.from({ length: size }, () => random.next() - 0.5));
        biases.push(tensor);
        bias[module] = tensor;
      }
      return { ...(layer as LayerTensors), bias };
    });
    const biasedBase: BaseTensors = { ...base, layers };
    const onnx = await OnnxHfModel.create(biased, biasedBase, 1);
    const tfjsLora = uploadLora(tf, biased, adapter.settings, adapter.weights);
    try {
      const prompts = reference.models['llama-untied']?.prompts ?? [];
      const tfjs = await generateHf(tf, runnable(biased, biasedBase, tfjsLora), text, rowsOf(prompts, 1));
      const ours = await generateHfOnnx(onnx, lora, text, rowsOf(prompts, 1));
      expectSameSamples(ours, tfjs);
      // The biases matter: without them the samples' logprobs differ.
      const unbiased = await generateHfOnnx(
        (loaded.get('llama-untied') as Loaded).onnx,
        lora,
        text,
        rowsOf(prompts, 1),
      );
      expect(Math.abs((unbiased[0]?.logprobs[0] as number) - (ours[0]?.logprobs[0] as number))).toBeGreaterThan(1e-3);
    } finally {
      disposeLora(tfjsLora);
      await onnx.release();
      for (const tensor of biases) tensor.dispose();
    }
  });
});

describe.each(MODELS)('%s on onnxruntime', (name) => {
  const prompts = reference.models[name]?.prompts ?? [];

  it("gives transformers' logits at every position through the cache, after a 2-token prefill", async () => {
    const { onnx } = loaded.get(name) as Loaded;
    const decoder = await onnxStepDecoder(onnx, null, text);
    for (const prompt of prompts) {
      if (prompt.ids.length < 3) continue;
      let { cache, logits } = await decoder.prefill([prompt.ids.slice(0, 2)], 2);
      expect(maxDifference(prompt.logits[1] as number[], logits), `${prompt.name} position 1`).toBeLessThan(
        LOGIT_TOLERANCE,
      );
      for (let position = 2; position < prompt.ids.length; position += 1) {
        ({ cache, logits } = await decoder.decodeStep(
          cache,
          [prompt.ids[position] as number],
          Int32Array.of(position),
          new Float32Array(position + 1),
        ));
        expect(
          maxDifference(prompt.logits[position] as number[], logits),
          `${prompt.name} position ${position}`,
        ).toBeLessThan(LOGIT_TOLERANCE);
      }
    }
  });

  it("gives the PeftModel's logits with PEFT's adapter, from a whole-prompt prefill", async () => {
    const { onnx, lora } = loaded.get(name) as Loaded;
    const expected = JSON.parse(readFileSync(path.join(FIXTURES, 'lora', name, 'logits.json'), 'utf8')) as {
      prompts: Prompt[];
    };
    const decoder = await onnxStepDecoder(onnx, lora, text);
    // Right-padded together: each row's last prompt token gives its own logits.
    const batch = expected.prompts.map((prompt) => prompt.ids);
    const length = Math.max(...batch.map((ids) => ids.length));
    const { logits } = await decoder.prefill(batch, length);
    const vocabulary = (loaded.get(name) as Loaded).config.vocabularySize;
    expected.prompts.forEach((prompt, row) =>
      expect(
        maxDifference(
          prompt.logits[prompt.ids.length - 1] as number[],
          logits.subarray(row * vocabulary, (row + 1) * vocabulary),
        ),
        prompt.name,
      ).toBeLessThan(LOGIT_TOLERANCE),
    );
  });

  it('samples the tfjs path’s tokens and logprobs: greedy and seeded, rows of different lengths and budgets, LoRA on', async () => {
    const { config, base, onnx, adapter, lora } = loaded.get(name) as Loaded;
    const tfjsLora = uploadLora(tf, config, adapter.settings, adapter.weights);
    try {
      for (const temperature of [0, 1]) {
        for (const withLora of [false, true]) {
          const tfjs = await generateHf(
            tf,
            runnable(config, base, withLora ? tfjsLora : null),
            text,
            rowsOf(prompts, temperature),
          );
          // A cache of room for 1 generated position grows (and is copied) 3 times on the way.
          const ours = await generateHfOnnx(onnx, withLora ? lora : null, text, rowsOf(prompts, temperature), {
            initialRoom: temperature === 0 ? 1 : 64,
          });
          expect(ours.map((sequence) => sequence.tokens.length)).toEqual([9, 3, 6, 2, 8]);
          expectSameSamples(ours, tfjs);
        }
      }
    } finally {
      disposeLora(tfjsLora);
    }
  });
});

/**
 * The engine's Llama and Qwen3 forward pass, LoRA adapters and LoRA gradients against the
 * reference fixtures that transformers and PEFT wrote (`test/fixtures/reference/`, see its
 * README): tied and untied embeddings, GQA, head_dim ≠ hidden/heads, llama3 rope scaling, F32,
 * BF16, F16 and sharded weights. Each model runs twice: with its weights in the wasm heap (sampling,
 * and training of models that fit it) and in host memory (training of larger ones: blocks uploaded
 * one at a time and checkpointed, recomputed in the backward pass).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../src/engine/hf/files.js';
import type { WeightPlacement } from '../../src/engine/hf/files.js';
import { disposeLora, loraName, peftName, readAdapter, uploadLora } from '../../src/engine/hf/lora.js';
import { decodeStep, disposeHfCache, forwardLogits, prefill, runnable } from '../../src/engine/hf/model.js';
import type { BaseTensors, LinearModule } from '../../src/engine/hf/model.js';
import { generateHf } from '../../src/engine/hf/sampler.js';
import type { TextLayer } from '../../src/text/loader.js';
import { trainableAdapter } from '../../src/engine/hf/trainer.js';
import { SeededRandom } from '../../src/engine/random.js';
import { computeStep, lossSettings } from '../../src/engine/trainer.js';
import { readSafetensors } from '../../src/engine/safetensors.js';
import type { HfModelConfig } from '../../src/engine/hf/config.js';
import { requestedEngineRuntime } from '../../src/engine/onnx/onnx-runtime.js';
import type { EngineRuntimeName } from '../../src/engine/onnx/onnx-runtime.js';
import { REFERENCE_FIXTURES, REFERENCE_MODELS } from './support/reference-models.js';

const FIXTURES = REFERENCE_FIXTURES;
const MODELS = REFERENCE_MODELS;
/** The issue's bound for float32 logits; transformers' own float32 variants differ by ~1e-5. */
const LOGIT_TOLERANCE = 1e-4;
/** The fixture README's bound for LoRA gradients (float32 vs float64 differ by ~5e-6). */
const GRADIENT_TOLERANCE = 1e-4;

interface Prompt {
  readonly name: string;
  readonly ids: number[];
  readonly logits: number[][];
}

const reference = JSON.parse(readFileSync(path.join(FIXTURES, 'logits.json'), 'utf8')) as {
  models: Record<string, { prompts: Prompt[] }>;
};

function maxDifference(expected: readonly (readonly number[])[], actual: Float32Array): number {
  let max = 0;
  expected.forEach((row, position) =>
    row.forEach((value, token) => {
      max = Math.max(max, Math.abs(value - (actual[position * row.length + token] as number)));
    }),
  );
  return max;
}

let tf: TensorFlow;
const PLACEMENTS = ['heap', 'host'] as const satisfies readonly WeightPlacement[];
const loaded = new Map<string, { config: HfModelConfig; base: BaseTensors }>();

beforeAll(async () => {
  tf = await loadTensorFlow();
  for (const name of MODELS)
    for (const placement of PLACEMENTS) {
      const directory = path.join(FIXTURES, name);
      const config = await readHfConfig(directory);
      loaded.set(`${name} ${placement}`, { config, base: await loadBaseTensors(tf, directory, config, placement) });
    }
});
afterAll(() => {
  for (const { base } of loaded.values()) disposeBase(base);
});

/**
 * The loss and LoRA gradients of the engine's training step on a model's fixed PEFT batch (10
 * learned positions; `logitsPerChunk` of 3 × the vocabulary cuts the loss into 4 chunks).
 */
async function fixtureStep(
  name: string,
  placement: WeightPlacement,
  logitsPerChunk?: number,
  runtime?: EngineRuntimeName,
) {
  const { config, base } = loaded.get(`${name} ${placement}`) as { config: HfModelConfig; base: BaseTensors };
  const folder = path.join(FIXTURES, 'lora', name);
  const adapter = await readAdapter(path.join(folder, 'adapter'), config);
  const batch = JSON.parse(readFileSync(path.join(folder, 'batch.json'), 'utf8')) as {
    input_ids: number[][];
    lengths: number[];
    mask: number[][];
    weights: number[][];
    loss: number;
  };
  // The RL policy-gradient loss at ratio 1 with `weights` as advantages is the fixture's loss.
  const sequences = batch.input_ids.map((ids, row) => {
    const length = batch.lengths[row] as number;
    return {
      tokens: ids.slice(0, length),
      mask: (batch.mask[row] as number[]).slice(0, length),
      weights: (batch.weights[row] as number[]).slice(0, length),
      oldLogprobs: ids.slice(0, length).map(() => Number.NaN),
    };
  });
  const trainable = trainableAdapter(
    tf,
    { directory: folder, config, base, text: null as never },
    adapter.settings,
    adapter.weights,
    { logitsPerChunk, runtime },
  );
  return {
    config,
    folder,
    adapter,
    batch,
    step: await computeStep(tf, trainable, sequences, lossSettings('rl', null)),
  };
}

/** Asserts that a {@link fixtureStep} gives PEFT's loss and every LoRA gradient (within GRADIENT_TOLERANCE). */
async function expectPeftStep({ config, folder, adapter, batch, step }: Awaited<ReturnType<typeof fixtureStep>>) {
  expect(step.loss).toBeCloseTo(batch.loss, 5);
  const { tensors } = await readSafetensors(path.join(folder, 'grads.safetensors'));
  let compared = 0;
  for (let layer = 0; layer < config.layerCount; layer += 1)
    for (const module of adapter.settings.targetModules as LinearModule[])
      for (const matrix of ['A', 'B'] as const) {
        const expected = tensors.get(peftName(layer, module, matrix));
        const ours = step.gradients.get(loraName(layer, module, matrix)) as Float32Array;
        expect(expected, peftName(layer, module, matrix)).toBeDefined();
        const [rows, columns] = (expected as { shape: readonly number[] }).shape as [number, number];
        let max = 0;
        // Ours is the transpose: [in, rank] for A, [rank, out] for B.
        for (let row = 0; row < rows; row += 1)
          for (let column = 0; column < columns; column += 1)
            max = Math.max(
              max,
              Math.abs(
                ((expected as { data: Float32Array }).data[row * columns + column] as number) -
                  (ours[column * rows + row] as number),
              ),
            );
        expect(max, `${peftName(layer, module, matrix)}`).toBeLessThan(GRADIENT_TOLERANCE);
        compared += 1;
      }
  expect(compared).toBe(config.layerCount * 7 * 2);
}

describe.each(MODELS)(
  '%s, trained on onnxruntime (the fast path; the suites below train on tfjs-wasm unless POLICYLOOP_ENGINE_RUNTIME says otherwise)',
  (model) => {
    it(`gives PEFT's loss and LoRA gradients on the fixed batch (gradients within ${GRADIENT_TOLERANCE})`, async () => {
      await expectPeftStep(await fixtureStep(model, 'heap', undefined, 'onnxruntime'));
    });
  },
);

describe.each(MODELS.flatMap((model) => PLACEMENTS.map((placement) => [model, placement] as const)))(
  '%s, weights in %s memory',
  (model, placement) => {
    const name = `${model} ${placement}`;
    const prompts = reference.models[model]?.prompts ?? [];

    it('has six reference prompts', () => {
      expect(prompts.length).toBe(6);
    });

    it(`gives transformers' logits within ${LOGIT_TOLERANCE} for every prompt and position`, () => {
      const { config, base } = loaded.get(name) as { config: HfModelConfig; base: BaseTensors };
      const model = runnable(config, base, null);
      for (const prompt of prompts) {
        const logits = tf.tidy(() => forwardLogits(tf, model, Int32Array.from(prompt.ids), 1, prompt.ids.length));
        const difference = maxDifference(prompt.logits, logits.dataSync() as Float32Array);
        logits.dispose();
        expect(difference, prompt.name).toBeLessThan(LOGIT_TOLERANCE);
      }
    });

    it('gives the same logits through the key/value cache, token by token after a 2-token prefill', () => {
      const { config, base } = loaded.get(name) as { config: HfModelConfig; base: BaseTensors };
      const model = runnable(config, base, null);
      const prompt = prompts.find((candidate) => candidate.name === 'chat-text') as Prompt;
      const first = tf.tidy(() => {
        const output = prefill(tf, model, Int32Array.from(prompt.ids.slice(0, 2)), 1, 2, [2]);
        return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
      });
      let cache = { keys: first.keys, values: first.values };
      expect(maxDifference([prompt.logits[1] as number[]], first.logits.dataSync() as Float32Array)).toBeLessThan(
        LOGIT_TOLERANCE,
      );
      first.logits.dispose();
      for (let position = 2; position < prompt.ids.length; position += 1) {
        const previous = cache;
        const step = tf.tidy(() => {
          const output = decodeStep(
            tf,
            model,
            previous,
            [prompt.ids[position] as number],
            Int32Array.of(position),
            new Float32Array(position + 1),
          );
          return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
        });
        cache = { keys: step.keys, values: step.values };
        const expected = [prompt.logits[position] as number[]];
        expect(maxDifference(expected, step.logits.dataSync() as Float32Array), `position ${position}`).toBeLessThan(
          LOGIT_TOLERANCE,
        );
        step.logits.dispose();
      }
      disposeHfCache(cache);
    });

    it("gives the PeftModel's logits with PEFT's adapter loaded", async () => {
      const { config, base } = loaded.get(name) as { config: HfModelConfig; base: BaseTensors };
      const adapter = await readAdapter(path.join(FIXTURES, 'lora', model, 'adapter'), config);
      expect(adapter.settings).toMatchObject({ rank: 4, alpha: 8 });
      const lora = uploadLora(tf, config, adapter.settings, adapter.weights);
      const expected = JSON.parse(readFileSync(path.join(FIXTURES, 'lora', model, 'logits.json'), 'utf8')) as {
        prompts: Prompt[];
      };
      try {
        const model = runnable(config, base, lora);
        for (const prompt of expected.prompts) {
          const logits = tf.tidy(() => forwardLogits(tf, model, Int32Array.from(prompt.ids), 1, prompt.ids.length));
          expect(maxDifference(prompt.logits, logits.dataSync() as Float32Array), prompt.name).toBeLessThan(
            LOGIT_TOLERANCE,
          );
          logits.dispose();
        }
      } finally {
        disposeLora(lora);
      }
    });

    it(`gives PEFT's loss and LoRA gradients on the fixed batch (gradients within ${GRADIENT_TOLERANCE})`, async () => {
      await expectPeftStep(await fixtureStep(model, placement));
    });

    if (placement === 'host')
      it("recomputes the sampler's logprobs of sampled tokens in training (ratio 1, kl_div about 0)", async () => {
        const { config, base } = loaded.get(`${model} heap`) as { config: HfModelConfig; base: BaseTensors };
        const adapter = await readAdapter(path.join(FIXTURES, 'lora', model, 'adapter'), config);
        const lora = uploadLora(tf, config, adapter.settings, adapter.weights);
        const prompt = (prompts.find((candidate) => candidate.name === 'chat-text') as Prompt).ids;
        const text = { stopTokenIds: [], decode: () => '' } as unknown as TextLayer;
        const sampled = await generateHf(
          tf,
          runnable(config, base, lora),
          text,
          [1, 2, 3].map((seed) => ({
            prompt,
            sampling: {
              temperature: 1,
              topP: 1,
              maxTokens: 8,
              stop: [],
              topLogprobs: 0,
              random: new SeededRandom(seed),
            },
          })),
        );
        disposeLora(lora);
        const sequences = sampled.map((sequence, row) => {
          const tokens = [...prompt, ...sequence.tokens];
          const learned = tokens.map((_, index) => (index >= prompt.length ? 1 : 0));
          return {
            tokens,
            mask: learned,
            weights: learned.map((value) => value * (row - 1)),
            oldLogprobs: tokens.map((_, index) =>
              index >= prompt.length ? (sequence.logprobs[index - prompt.length] as number) : Number.NaN,
            ),
          };
        });
        const hostBase = (loaded.get(name) as { base: BaseTensors }).base;
        const trainable = trainableAdapter(
          tf,
          { directory: model, config, base: hostBase, text },
          adapter.settings,
          adapter.weights,
          { logitsPerChunk: 5 * config.vocabularySize },
        );
        const step = await computeStep(tf, trainable, sequences, lossSettings('rl', null));
        expect(step.trainableTokens).toBe(24);
        expect(Math.abs(step.approximateKl)).toBeLessThan(1e-5);
        expect(step.meanRatio).toBeCloseTo(1, 5);
      });

    if (placement === 'host')
      it('gives the same loss, entropy and LoRA gradients as with the weights in the heap (checkpointed backward, chunked loss)', async () => {
        const { config } = loaded.get(name) as { config: HfModelConfig };
        const host = (await fixtureStep(model, 'host', 3 * config.vocabularySize)).step;
        const heap = (await fixtureStep(model, 'heap')).step;
        expect(host.loss).toBeCloseTo(heap.loss, 6);
        expect(host.entropy).toBeCloseTo(heap.entropy, 6);
        expect(heap.entropy).toBeGreaterThan(0.1);
        let max = 0;
        let largest = 0;
        for (const [key, expected] of heap.gradients) {
          const ours = host.gradients.get(key) as Float32Array;
          expected.forEach((value, index) => {
            max = Math.max(max, Math.abs(value - (ours[index] as number)));
            largest = Math.max(largest, Math.abs(value));
          });
        }
        expect(largest).toBeGreaterThan(1e-3);
        // tfjs runs the same operations either way; onnxruntime's multithreaded products block the
        // chunked head's rows differently (float32 rounding, ~1e-5 of the largest gradient).
        expect(max).toBeLessThan(requestedEngineRuntime() === 'onnxruntime' ? 1e-5 : 1e-6);
      });
  },
);

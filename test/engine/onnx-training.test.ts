/**
 * The LoRA training step on onnxruntime (hand-derived backward graphs, `src/engine/onnx`) against the
 * same step on tfjs-wasm: the same loss, entropy, objective sums and LoRA gradients, on the committed
 * reference models (Llama and Qwen3 with q/k norms, tied and untied, GQA) with their PEFT adapters,
 * ragged rows with masked prompt tokens, chunked loss and a KL penalty.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { initialLora, readAdapter } from '../../src/engine/hf/lora.js';
import type { BaseTensors } from '../../src/engine/hf/model.js';
import type { HfModelConfig } from '../../src/engine/hf/config.js';
import { hfReferenceLoader, trainableAdapter } from '../../src/engine/hf/trainer.js';
import type { TextLayer } from '../../src/text/loader.js';
import { computeStep, lossSettings } from '../../src/engine/trainer.js';
import type { LossSettings, StepResult } from '../../src/engine/trainer.js';
import type { TrainingSequence } from '../../src/engine/training-data.js';
import { REFERENCE_FIXTURES, REFERENCE_MODELS, useReferenceModels } from './support/reference-models.js';

const FIXTURES = REFERENCE_FIXTURES;
const MODELS = REFERENCE_MODELS;
const models = useReferenceModels();
const { loaded } = models;
let tf: TensorFlow;
beforeAll(() => {
  tf = models.tf;
});

/** The fixture's PEFT batch (two ragged rows, prompt tokens masked) plus a third row with an offset and old logprobs. */
function sequencesOf(name: string): TrainingSequence[] {
  const batch = JSON.parse(readFileSync(path.join(FIXTURES, 'lora', name, 'batch.json'), 'utf8')) as {
    input_ids: number[][];
    lengths: number[];
    mask: number[][];
    weights: number[][];
  };
  const rows: TrainingSequence[] = batch.input_ids.map((ids, row) => {
    const length = batch.lengths[row] as number;
    return {
      tokens: ids.slice(0, length),
      mask: (batch.mask[row] as number[]).slice(0, length),
      weights: (batch.weights[row] as number[]).slice(0, length),
      oldLogprobs: ids.slice(0, length).map(() => Number.NaN),
    };
  });
  const tokens = [5, 17, 29, 41, 53, 65, 77, 89];
  rows.push({
    tokens,
    mask: tokens.map((_, index) => (index >= 5 ? 1 : 0)),
    weights: tokens.map((_, index) => (index >= 5 ? 0.7 : 0)),
    oldLogprobs: tokens.map((_, index) => (index >= 5 ? -3 - 0.1 * index : Number.NaN)),
    offset: 4,
  });
  return rows;
}

async function stepOn(
  name: string,
  runtime: 'onnxruntime' | 'tfjs-wasm',
  settings: LossSettings,
  options: { readonly logitsPerChunk?: number; readonly kl?: boolean } = {},
): Promise<StepResult> {
  const { config, base } = loaded.get(name) as { config: HfModelConfig; base: BaseTensors };
  const folder = path.join(FIXTURES, 'lora', name);
  const adapter = await readAdapter(path.join(folder, 'adapter'), config);
  const model = { directory: folder, config, base, text: null as unknown as TextLayer };
  const trainable = trainableAdapter(tf, model, adapter.settings, adapter.weights, {
    runtime,
    logitsPerChunk: options.logitsPerChunk,
  });
  const reference = options.kl ? await hfReferenceLoader(tf, model, adapter.settings, runtime)(null) : undefined;
  return computeStep(tf, trainable, sequencesOf(name), settings, reference);
}

function expectSameStep(ours: StepResult, theirs: StepResult): void {
  expect(ours.trainableTokens).toBe(theirs.trainableTokens);
  expect(ours.loss).toBeCloseTo(theirs.loss, 5);
  expect(ours.entropy).toBeCloseTo(theirs.entropy, 4);
  expect(ours.meanRatio).toBeCloseTo(theirs.meanRatio, 5);
  expect(ours.sums.klReference).toBeCloseTo(theirs.sums.klReference, 4);
  let compared = 0;
  for (const [key, expected] of theirs.gradients) {
    const got = ours.gradients.get(key) as Float32Array;
    let largest = 0;
    let difference = 0;
    expected.forEach((value, index) => {
      largest = Math.max(largest, Math.abs(value));
      difference = Math.max(difference, Math.abs(value - (got[index] as number)));
    });
    // Relative to the matrix's largest gradient (a B of zeros would make every entry's own ratio meaningless).
    expect(difference / Math.max(largest, 1e-6), key).toBeLessThan(1e-4);
    if (largest > 1e-4) compared += 1;
  }
  // A fresh adapter has gradients on its B matrices only: half of them.
  expect(compared).toBeGreaterThanOrEqual(theirs.gradients.size / 2);
}

describe.each(MODELS)('%s: a LoRA step on onnxruntime', (name) => {
  it('gives the tfjs-wasm loss, entropy and LoRA gradients (RL objective, ragged rows, masked prompts, offsets)', async () => {
    const settings = lossSettings('rl', null);
    expectSameStep(await stepOn(name, 'onnxruntime', settings), await stepOn(name, 'tfjs-wasm', settings));
  });

  it('and with the loss in chunks of 2 positions, SFT, and PPO clipping with a KL penalty to the base', async () => {
    const { config } = loaded.get(name) as { config: HfModelConfig };
    const sft = lossSettings('sft', null);
    expectSameStep(
      await stepOn(name, 'onnxruntime', sft, { logitsPerChunk: 2 * config.vocabularySize }),
      await stepOn(name, 'tfjs-wasm', sft),
    );
    const kl = lossSettings('rl', { kl_penalty_coef: 0.1, epsilon: 0.1 });
    expectSameStep(
      await stepOn(name, 'onnxruntime', kl, { kl: true }),
      await stepOn(name, 'tfjs-wasm', kl, { kl: true }),
    );
  });
});

it('a fresh adapter (B = 0) gets gradients on B only, as on tfjs-wasm', async () => {
  const { config, base } = loaded.get('qwen3-untied') as { config: HfModelConfig; base: BaseTensors };
  const settings = { rank: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] as const };
  const weights = initialLora(config, settings);
  const model = { directory: 'qwen3-untied', config, base, text: null as unknown as TextLayer };
  const step = async (runtime: 'onnxruntime' | 'tfjs-wasm') =>
    computeStep(
      tf,
      trainableAdapter(tf, model, settings, weights, { runtime }),
      sequencesOf('qwen3-untied'),
      lossSettings('rl', null),
    );
  const ours = await step('onnxruntime');
  expectSameStep(ours, await step('tfjs-wasm'));
  expect([...ours.gradients.keys()].length).toBe(config.layerCount * 3 * 2);
  expect(Math.max(...Array.from(ours.gradients.get('layers.0.q_proj.A') as Float32Array, Math.abs))).toBe(0);
});

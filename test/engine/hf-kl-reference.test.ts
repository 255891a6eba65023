/**
 * The KL penalty's reference on a real model's LoRA adapter (src/engine/hf/trainer.ts,
 * `hfReferenceLoader`), on the reference fixture `qwen3-tied` and its PEFT adapter: the base
 * model (LoRA off) and a PEFT adapter folder. `kl_ref` is the mean over learned tokens of
 * log π − log π_ref, so against the base it must equal the difference of the two models' mean
 * token logprobs (their SFT losses), and against the policy's own adapter folder 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../src/engine/hf/files.js';
import { initialLora, readAdapter } from '../../src/engine/hf/lora.js';
import type { BaseTensors } from '../../src/engine/hf/model.js';
import { hfReferenceLoader, trainableAdapter } from '../../src/engine/hf/trainer.js';
import type { HfBaseModel } from '../../src/engine/hf/runtime.js';
import { computeStep, lossSettings } from '../../src/engine/trainer.js';
import type { TrainingSequence } from '../../src/engine/training-data.js';

const FOLDER = path.resolve('test/fixtures/reference/qwen3-tied');
const ADAPTER = path.resolve('test/fixtures/reference/lora/qwen3-tied/adapter');

let tf: TensorFlow;
let base: BaseTensors;
let model: HfBaseModel;
let sequences: TrainingSequence[];
beforeAll(async () => {
  tf = await loadTensorFlow();
  const config = await readHfConfig(FOLDER);
  base = await loadBaseTensors(tf, FOLDER, config, 'heap');
  model = { directory: FOLDER, config, base, text: null as never } as HfBaseModel;
  const batch = JSON.parse(
    readFileSync(path.resolve('test/fixtures/reference/lora/qwen3-tied/batch.json'), 'utf8'),
  ) as {
    input_ids: number[][];
    lengths: number[];
    mask: number[][];
    weights: number[][];
  };
  sequences = batch.input_ids.map((ids, row) => {
    const length = batch.lengths[row] as number;
    return {
      tokens: ids.slice(0, length),
      mask: (batch.mask[row] as number[]).slice(0, length),
      weights: (batch.weights[row] as number[]).slice(0, length),
      oldLogprobs: ids.slice(0, length).map(() => Number.NaN),
    };
  });
});
afterAll(() => disposeBase(base));

describe('the KL reference of a LoRA adapter', () => {
  it('is the base model (LoRA off) by default, and a PEFT adapter folder when named', async () => {
    const adapter = await readAdapter(ADAPTER, model.config);
    const policy = trainableAdapter(tf, model, adapter.settings, adapter.weights);
    const off = trainableAdapter(tf, model, adapter.settings, initialLora(model.config, adapter.settings));
    // −mean log π over the learned tokens of each model.
    const sftLoss = async (trainable: typeof policy) =>
      (await computeStep(tf, trainable, sequences, lossSettings('sft', null))).loss;
    const expected = (await sftLoss(off)) - (await sftLoss(policy));
    expect(Math.abs(expected)).toBeGreaterThan(1e-3); // the adapter changes the logprobs
    const loader = hfReferenceLoader(tf, model, adapter.settings);
    const settings = lossSettings('rl', { kl_penalty_coef: 0.1 });
    const againstBase = await computeStep(tf, policy, sequences, settings, await loader(null));
    const tokens = againstBase.trainableTokens;
    expect(againstBase.sums.klReference / tokens).toBeCloseTo(expected, 4);
    const againstItself = await computeStep(tf, policy, sequences, settings, await loader(ADAPTER));
    expect(Math.abs(againstItself.sums.klReference / tokens)).toBeLessThan(1e-5);
  });
});

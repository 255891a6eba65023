/**
 * An adapter the engine trained and exported, loaded by PEFT (`PeftModel.from_pretrained`, by
 * `scripts/reference/peft_exported_logits.py`), gives the logits the engine gives for the same
 * checkpoint: the exported tensor names, shapes, layout and adapter_config.json mean to PEFT what
 * they mean to us. Fixtures: `test/fixtures/exported-adapters/` (see scripts/write-exported-adapters.ts).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadTensorFlow } from '../../src/engine/backend.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../src/engine/hf/files.js';
import { disposeLora, readAdapter, uploadLora } from '../../src/engine/hf/lora.js';
import { forwardLogits, runnable } from '../../src/engine/hf/model.js';

const MODELS = ['qwen3-tied', 'llama-untied'] as const;

interface Prompt {
  readonly name: string;
  readonly ids: number[];
  readonly logits: number[][];
}

describe.each(MODELS)('the adapter exported for %s', (name) => {
  it("gives PEFT's logits within 1e-4, and differs from the base model's", async () => {
    const tf = await loadTensorFlow();
    const baseDirectory = path.resolve('test/fixtures/reference', name);
    const folder = path.resolve('test/fixtures/exported-adapters', name);
    const config = await readHfConfig(baseDirectory);
    const adapterConfig = JSON.parse(readFileSync(path.join(folder, 'adapter', 'adapter_config.json'), 'utf8'));
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 16, task_type: 'CAUSAL_LM' });
    const expected = JSON.parse(readFileSync(path.join(folder, 'logits.json'), 'utf8')) as { prompts: Prompt[] };
    expect(expected.prompts.length).toBe(6);
    const base = await loadBaseTensors(tf, baseDirectory, config);
    const adapter = await readAdapter(path.join(folder, 'adapter'), config);
    const lora = uploadLora(tf, config, adapter.settings, adapter.weights);
    try {
      for (const prompt of expected.prompts) {
        const ids = Int32Array.from(prompt.ids);
        const ours = tf.tidy(() => forwardLogits(tf, runnable(config, base, lora), ids, 1, ids.length).dataSync());
        const plain = tf.tidy(() => forwardLogits(tf, runnable(config, base, null), ids, 1, ids.length).dataSync());
        let difference = 0;
        let effect = 0;
        prompt.logits.forEach((row, position) =>
          row.forEach((value, token) => {
            const index = position * row.length + token;
            difference = Math.max(difference, Math.abs(value - (ours[index] as number)));
            effect = Math.max(effect, Math.abs(value - (plain[index] as number)));
          }),
        );
        expect(difference, prompt.name).toBeLessThan(1e-4);
        expect(effect, `${prompt.name}: the adapter changes the logits`).toBeGreaterThan(1e-2);
      }
    } finally {
      disposeLora(lora);
      disposeBase(base);
    }
  });
});

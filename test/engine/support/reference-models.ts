/**
 * The tiny reference models of `test/fixtures/reference` (written by transformers), loaded once
 * per test file with their weights in the wasm heap and freed after it.
 */
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { loadTensorFlow } from '../../../src/engine/backend.js';
import type { HfModelConfig } from '../../../src/engine/hf/config.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../../src/engine/hf/files.js';
import type { BaseTensors } from '../../../src/engine/hf/model.js';
import type { TensorFlow } from '../../../src/engine/tensorflow.js';

/** The reference fixtures' folder. */
export const REFERENCE_FIXTURES = path.resolve('test/fixtures/reference');

/** The reference models: Llama and Qwen3, each with a tied and an untied output projection. */
export const REFERENCE_MODELS = ['llama-tied', 'llama-untied', 'qwen3-tied', 'qwen3-untied'] as const;

/** The loaded reference models of a test file, by name, and the tfjs module they live in. */
export interface ReferenceModels {
  readonly tf: TensorFlow;
  readonly loaded: ReadonlyMap<string, { readonly config: HfModelConfig; readonly base: BaseTensors }>;
}

/**
 * Loads every reference model before the file's tests (in `beforeAll`) and frees them after
 * (`afterAll`); read `tf` and `loaded` inside tests.
 */
export function useReferenceModels(): ReferenceModels {
  let tf: TensorFlow | undefined;
  const loaded = new Map<string, { config: HfModelConfig; base: BaseTensors }>();
  beforeAll(async () => {
    tf = await loadTensorFlow();
    for (const name of REFERENCE_MODELS) {
      const directory = path.join(REFERENCE_FIXTURES, name);
      const config = await readHfConfig(directory);
      loaded.set(name, { config, base: await loadBaseTensors(tf, directory, config, 'heap') });
    }
  });
  afterAll(() => {
    for (const { base } of loaded.values()) disposeBase(base);
  });
  return {
    get tf(): TensorFlow {
      if (tf === undefined) throw new Error('The reference models are loaded in beforeAll: read tf inside a test.');
      return tf;
    },
    loaded,
  };
}

/**
 * Batched sampling on Hugging Face models: the shared generation loop of `../sampler.ts` over a
 * Hugging Face model, ending a row on the model's end-of-turn tokens, a stop sequence or its token
 * budget.
 */
import type { TensorFlow } from '../tensorflow.js';
import { generateRows } from '../sampler.js';
import type { GeneratedSequence, GenerationRow } from '../sampler.js';
import { decodeStep, prefill, selectHfCacheRows } from './model.js';
import type { RunnableModel } from './model.js';
import type { TextLayer } from '../../text/loader.js';

/** Completion text leaves out special tokens, as vLLM's `skip_special_tokens` default does. */
const SKIP_SPECIAL = { skipSpecialTokens: true } as const;

/**
 * Extends every row until it ends, sharing each forward pass across rows. Rows need prompts of at
 * least one token that fit the context with `maxTokens`. A returned sequence keeps its final
 * end-of-turn token (so a trainer learns to stop); its `text` does not.
 */
export async function generateHf(
  tf: TensorFlow,
  model: RunnableModel,
  text: TextLayer,
  rows: readonly GenerationRow[],
): Promise<GeneratedSequence[]> {
  const config = model.config;
  const stopIds = new Set(text.stopTokenIds);
  return generateRows(
    tf,
    {
      vocabularySize: config.vocabularySize,
      contextLength: config.contextLength,
      headCount: config.headCount,
      // The forward pass attends over every earlier token (no sliding window).
      attentionWindow: undefined,
      prefill: (prompts, promptLength) => {
        const tokens = new Int32Array(prompts.length * promptLength);
        prompts.forEach((prompt, index) => tokens.set(prompt, index * promptLength));
        return prefill(
          tf,
          model,
          tokens,
          prompts.length,
          promptLength,
          prompts.map((prompt) => prompt.length),
        );
      },
      decodeStep: (cache, tokens, positions, keyMask) => decodeStep(tf, model, cache, tokens, positions, keyMask),
      selectCacheRows: (cache, selected) => selectHfCacheRows(tf, model, cache, selected),
      decodeText: (ids) => text.decode(ids, SKIP_SPECIAL),
      isEndToken: (id) => stopIds.has(id),
    },
    rows,
  );
}

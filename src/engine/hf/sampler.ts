/**
 * Batched sampling on Hugging Face models: one prefill for the distinct prompts, then one
 * decoding step per token for every unfinished row, ending a row on the model's end-of-turn
 * tokens, a stop sequence or its token budget.
 */
import type { Tensor3D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from '../backend.js';
import { sampleToken, yieldToEventLoop } from '../sampler.js';
import type { GeneratedSequence, GenerationRow, TokenAlternative } from '../sampler.js';
import { decodeStep, disposeHfCache, disposeReplacedHf, prefill, selectHfCacheRows } from './model.js';
import type { HfKeyValueCache, RunnableModel } from './model.js';
import type { TextLayer } from './text.js';

interface RowState {
  readonly row: GenerationRow;
  readonly tokens: number[];
  readonly logprobs: number[];
  readonly alternatives: TokenAlternative[][];
  finishReason: 'stop' | 'length' | null;
  text: string;
  keptTokens: number;
}

/** Completion text leaves out special tokens, as vLLM's `skip_special_tokens` default does. */
const SKIP_SPECIAL = { skipSpecialTokens: true } as const;

/** Most attention scores (rows × heads × prompt length²) in one prefill pass. */
const PREFILL_SCORE_BUDGET = 16 * 1024 * 1024;

function finishRow(state: RowState, text: TextLayer, stopIds: ReadonlySet<number>): void {
  const last = state.tokens[state.tokens.length - 1] as number;
  const ended = stopIds.has(last);
  const body = ended ? state.tokens.slice(0, -1) : state.tokens;
  const { stop } = state.row.sampling;
  if (stop.length > 0) {
    const longest = Math.max(...stop.map((sequence) => sequence.length));
    const tail = text.decode(body.slice(Math.max(0, body.length - 4 * longest - 4)), SKIP_SPECIAL);
    if (stop.some((sequence) => sequence.length > 0 && tail.includes(sequence))) {
      const decoded = text.decode(body, SKIP_SPECIAL);
      let cut = -1;
      for (const sequence of stop) {
        if (sequence.length === 0) continue;
        const at = decoded.indexOf(sequence);
        if (at >= 0 && (cut < 0 || at < cut)) cut = at;
      }
      let kept = body.length;
      while (kept > 0 && text.decode(body.slice(0, kept), SKIP_SPECIAL).length > cut) kept -= 1;
      state.finishReason = 'stop';
      state.text = decoded.slice(0, cut);
      state.keptTokens = kept;
      return;
    }
  }
  state.keptTokens = state.tokens.length;
  if (ended) state.finishReason = 'stop';
  else if (state.tokens.length >= state.row.sampling.maxTokens) state.finishReason = 'length';
  if (state.finishReason !== null) state.text = text.decode(body, SKIP_SPECIAL);
}

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
  if (rows.length === 0) return [];
  const config = model.config;
  const vocabulary = config.vocabularySize;
  const stopIds = new Set(text.stopTokenIds);
  const states: RowState[] = rows.map((row) => ({
    row,
    tokens: [],
    logprobs: [],
    alternatives: [],
    finishReason: null,
    text: '',
    keptTokens: 0,
  }));
  const promptLength = Math.max(...rows.map((row) => row.prompt.length));
  // Rows with the same prompt (the n choices of a request) share one prefill.
  const uniqueIndex = new Map<string, number>();
  const unique: number[][] = [];
  const rowToUnique = rows.map((row) => {
    const key = row.prompt.join(',');
    let index = uniqueIndex.get(key);
    if (index === undefined) {
      index = unique.length;
      uniqueIndex.set(key, index);
      unique.push([...row.prompt]);
    }
    return index;
  });
  const chunkRows = Math.max(1, Math.floor(PREFILL_SCORE_BUDGET / (config.headCount * promptLength * promptLength)));
  const parts: { cache: HfKeyValueCache; logits: Float32Array }[] = [];
  let cache: HfKeyValueCache;
  let logitsData: Float32Array;
  try {
    for (let start = 0; start < unique.length; start += chunkRows) {
      const chunk = unique.slice(start, start + chunkRows);
      const tokens = new Int32Array(chunk.length * promptLength);
      chunk.forEach((prompt, index) => tokens.set(prompt, index * promptLength));
      const result = tf.tidy(() => {
        const output = prefill(
          tf,
          model,
          tokens,
          chunk.length,
          promptLength,
          chunk.map((prompt) => prompt.length),
        );
        return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
      });
      parts.push({
        cache: { keys: result.keys, values: result.values },
        logits: (await result.logits.data()) as Float32Array,
      });
      result.logits.dispose();
      await yieldToEventLoop();
    }
  } catch (error) {
    for (const part of parts) disposeHfCache(part.cache);
    throw error;
  }
  const join = (pick: (part: HfKeyValueCache) => Tensor3D[][]): Tensor3D[][] =>
    pick((parts[0] as { cache: HfKeyValueCache }).cache).map((_, layer) => [
      tf.keep(
        tf.concat(
          parts.map((part) => (pick(part.cache)[layer] as Tensor3D[])[0] as Tensor3D),
          0,
        ),
      ),
    ]);
  const joined: HfKeyValueCache =
    parts.length === 1
      ? (parts[0] as { cache: HfKeyValueCache }).cache
      : { keys: join((part) => part.keys), values: join((part) => part.values) };
  if (parts.length > 1) for (const part of parts) disposeHfCache(part.cache);
  const uniqueLogits = new Float32Array(unique.length * vocabulary);
  let offset = 0;
  for (const part of parts) {
    uniqueLogits.set(part.logits, offset);
    offset += part.logits.length;
  }
  if (rowToUnique.every((uniqueRow, row) => uniqueRow === row)) {
    cache = joined;
    logitsData = uniqueLogits;
  } else {
    cache = selectHfCacheRows(tf, model, joined, rowToUnique);
    disposeHfCache(joined);
    logitsData = new Float32Array(rows.length * vocabulary);
    rowToUnique.forEach((uniqueRow, row) =>
      logitsData.set(uniqueLogits.subarray(uniqueRow * vocabulary, (uniqueRow + 1) * vocabulary), row * vocabulary),
    );
  }
  let cacheRows = states.map((_, index) => index);
  let step = 0;
  try {
    for (;;) {
      cacheRows.forEach((stateIndex, position) => {
        const state = states[stateIndex] as RowState;
        if (state.finishReason !== null) return;
        const sampled = sampleToken(
          logitsData.subarray(position * vocabulary, (position + 1) * vocabulary),
          state.row.sampling,
        );
        state.tokens.push(sampled.id);
        state.logprobs.push(sampled.logprob);
        state.alternatives.push(sampled.alternatives);
        finishRow(state, text, stopIds);
        if (state.finishReason === null && state.row.prompt.length + state.tokens.length >= config.contextLength)
          state.finishReason = 'length';
        if (state.row.isCancelled?.()) state.finishReason = 'length';
      });
      const remaining = cacheRows.filter((stateIndex) => (states[stateIndex] as RowState).finishReason === null);
      if (remaining.length === 0) break;
      if (remaining.length <= cacheRows.length / 2) {
        const selected = selectHfCacheRows(
          tf,
          model,
          cache,
          remaining.map((stateIndex) => cacheRows.indexOf(stateIndex)),
        );
        disposeHfCache(cache);
        cache = selected;
        cacheRows = remaining;
      }
      step += 1;
      const keyLength = promptLength + step;
      const tokens: number[] = [];
      const positions = new Int32Array(cacheRows.length);
      const keyMask = new Float32Array(cacheRows.length * keyLength);
      cacheRows.forEach((stateIndex, position) => {
        const state = states[stateIndex] as RowState;
        // A finished row keeps decoding at a valid position; its output is never read.
        positions[position] = Math.min(state.row.prompt.length + state.tokens.length - 1, config.contextLength - 1);
        tokens.push(state.tokens[state.tokens.length - 1] as number);
        for (let key = state.row.prompt.length; key < promptLength; key += 1)
          keyMask[position * keyLength + key] = -1e9;
      });
      const previous = cache;
      const result = tf.tidy(() => {
        const output = decodeStep(tf, model, previous, tokens, positions, keyMask);
        return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
      });
      cache = { keys: result.keys, values: result.values };
      disposeReplacedHf(previous, cache);
      logitsData = (await result.logits.data()) as Float32Array;
      result.logits.dispose();
      await yieldToEventLoop();
    }
  } finally {
    disposeHfCache(cache);
  }
  return states.map((state) => ({
    tokens: state.tokens.slice(0, state.keptTokens),
    logprobs: state.logprobs.slice(0, state.keptTokens),
    alternatives: state.alternatives.slice(0, state.keptTokens),
    text: state.text,
    finishReason: state.finishReason ?? 'length',
    sampledCount: state.tokens.length,
  }));
}

/**
 * Batched autoregressive sampling: one prefill over all prompts, then one decoding step per new
 * token for every unfinished row, each row with its own temperature, top-p, random stream, stop
 * sequences and token budget.
 */
import type { Tensor2D, Tensor3D } from '@tensorflow/tfjs-core';
import type { TensorFlow } from './tensorflow.js';
import type { ModelConfig } from './model-config.js';
import type { SeededRandom } from './random.js';
import { tokenizerOf } from './model-config.js';
import { END_TOKEN_ID } from './tokenizer.js';
import { decodeStep, disposeCache, disposeReplaced, prefill, selectCacheRows } from './transformer.js';
import type { KeyValueCache, ParameterTensors } from './transformer.js';
import { maxOf } from '../internal/arrays.js';

/** How one row is sampled. */
export interface RowSampling {
  /** 0 = greedy. Shapes only which token is drawn: logprobs are the model's own (temperature 1). */
  readonly temperature: number;
  /** Nucleus sampling mass in (0, 1]. */
  readonly topP: number;
  /** Maximum number of new tokens (already capped by the context). */
  readonly maxTokens: number;
  /** Stop sequences: generation ends before the first of them. */
  readonly stop: readonly string[];
  /** Alternatives to report per token (0 = none). */
  readonly topLogprobs: number;
  /** The row's random stream. */
  readonly random: SeededRandom;
}

/** One sequence to extend. */
export interface GenerationRow {
  readonly prompt: readonly number[];
  readonly sampling: RowSampling;
  /** Polled between steps; a cancelled row stops early and its result is dropped. */
  readonly isCancelled?: (() => boolean) | undefined;
}

/** An alternative token and its logprob. */
export interface TokenAlternative {
  readonly id: number;
  readonly logprob: number;
}

/** What a row produced. */
export interface GeneratedSequence {
  /** Sampled tokens that belong to the completion (stop-sequence tokens removed; `<|end|>` kept). */
  readonly tokens: number[];
  /** Logprob of each token of `tokens` under the model's distribution (temperature 1, no top-p). */
  readonly logprobs: number[];
  /** The top alternatives of each token of `tokens` (empty arrays unless asked for). */
  readonly alternatives: TokenAlternative[][];
  /** Text of the completion (without `<|end|>` and without the stop sequence). */
  readonly text: string;
  /** `stop` (end token or stop sequence) or `length` (token budget or context exhausted). */
  readonly finishReason: 'stop' | 'length';
  /** Number of tokens sampled, including any dropped stop-sequence tokens. */
  readonly sampledCount: number;
}

/** The sampled token of one row, with its logprob and alternatives. */
export interface SampledToken {
  readonly id: number;
  readonly logprob: number;
  readonly alternatives: TokenAlternative[];
}

/**
 * Samples one token from a row of logits at the row's temperature and top-p. The reported logprobs
 * (of the token and its alternatives) are the model's own, `log_softmax(logits)` at temperature 1
 * whatever the sampling settings, as vLLM's default `logprobs_mode: raw_logprobs` reports them: the
 * trainer recomputes exactly these, so a job's first importance ratio is 1 at every temperature
 * (docs/engine.md, "Logprobs and temperature").
 */
export function sampleToken(logits: Float32Array, sampling: RowSampling): SampledToken {
  const size = logits.length;
  let max = -Infinity;
  for (let index = 0; index < size; index += 1) max = Math.max(max, logits[index] as number);
  let rawTotal = 0;
  for (let index = 0; index < size; index += 1) rawTotal += Math.exp((logits[index] as number) - max);
  const logRawTotal = Math.log(rawTotal);
  const logprobOf = (index: number): number => (logits[index] as number) - max - logRawTotal;

  // The distribution tokens are drawn from: softmax(logits / T) (not needed when greedy).
  const temperature = sampling.temperature;
  const probabilities = new Float64Array(temperature > 0 ? size : 0);
  if (temperature > 0) {
    let total = 0;
    for (let index = 0; index < size; index += 1) {
      const value = Math.exp(((logits[index] as number) - max) / temperature);
      probabilities[index] = value;
      total += value;
    }
    for (let index = 0; index < size; index += 1) probabilities[index] = (probabilities[index] as number) / total;
  }

  let chosen = 0;
  if (sampling.temperature <= 0) {
    for (let index = 1; index < size; index += 1)
      if ((logits[index] as number) > (logits[chosen] as number)) chosen = index;
  } else if (sampling.topP < 1) {
    const order = Array.from({ length: size }, (_, index) => index).sort(
      (a, b) => (probabilities[b] as number) - (probabilities[a] as number),
    );
    let mass = 0;
    let kept = 0;
    while (kept < size && mass < sampling.topP) {
      mass += probabilities[order[kept] as number] as number;
      kept += 1;
    }
    let target = sampling.random.next() * mass;
    chosen = order[kept - 1] as number;
    for (let rank = 0; rank < kept; rank += 1) {
      target -= probabilities[order[rank] as number] as number;
      if (target <= 0) {
        chosen = order[rank] as number;
        break;
      }
    }
  } else {
    let target = sampling.random.next();
    chosen = size - 1;
    for (let index = 0; index < size; index += 1) {
      target -= probabilities[index] as number;
      if (target <= 0) {
        chosen = index;
        break;
      }
    }
  }
  const alternatives: TokenAlternative[] = [];
  if (sampling.topLogprobs > 0) {
    // The k highest logits, ties in id order (as a stable sort gives), without sorting the whole
    // vocabulary (151,936 ids for Qwen3).
    const k = Math.min(sampling.topLogprobs, size);
    const best: number[] = [];
    for (let index = 0; index < size; index += 1) {
      const value = logits[index] as number;
      if (best.length === k && value <= (logits[best[k - 1] as number] as number)) continue;
      let at = best.length;
      while (at > 0 && value > (logits[best[at - 1] as number] as number)) at -= 1;
      best.splice(at, 0, index);
      if (best.length > k) best.pop();
    }
    for (const id of best) alternatives.push({ id, logprob: logprobOf(id) });
  }
  return { id: chosen, logprob: logprobOf(chosen), alternatives };
}

interface RowState {
  readonly row: GenerationRow;
  readonly tokens: number[];
  readonly logprobs: number[];
  readonly alternatives: TokenAlternative[][];
  finishReason: 'stop' | 'length' | null;
  text: string;
  keptTokens: number;
}

/**
 * What {@link generateRows} needs of a model: a batched prefill and decoding step over a key/value
 * cache, and the text rules that end a row. The built-in toy engine and the Hugging Face models
 * each provide one.
 */
export interface BatchDecoder {
  readonly vocabularySize: number;
  readonly contextLength: number;
  /** Attention heads (to bound the attention scores of one prefill pass). */
  readonly headCount: number;
  /** Sliding attention window in tokens; `undefined` = every earlier token is in sight. */
  readonly attentionWindow: number | undefined;
  /**
   * Runs right-padded `prompts` (all padded to `promptLength`) inside `tf.tidy`: the logits of each
   * row's last prompt token `[rows, vocabulary]` and the filled cache (kept tensors).
   */
  prefill(prompts: readonly (readonly number[])[], promptLength: number): { logits: Tensor2D; cache: KeyValueCache };
  /**
   * One decoding step inside `tf.tidy`: `tokens[row]` at `positions[row]` over the cache plus itself,
   * `keyMask` `[rows, cacheLength + 1]` of 0 or -1e9. Returns the next logits and the grown cache.
   */
  decodeStep(
    cache: KeyValueCache,
    tokens: readonly number[],
    positions: Int32Array,
    keyMask: Float32Array,
  ): { logits: Tensor2D; cache: KeyValueCache };
  /** The given batch rows of a cache, in order (new kept tensors). */
  selectCacheRows(cache: KeyValueCache, rows: readonly number[]): KeyValueCache;
  /** The completion text of token ids. */
  decodeText(ids: readonly number[]): string;
  /** Whether a sampled token ends the row (kept in its tokens, left out of its text). */
  isEndToken(id: number): boolean;
}

function finishOnStop(state: RowState, decoder: Pick<BatchDecoder, 'decodeText' | 'isEndToken'>): void {
  const { stop } = state.row.sampling;
  const ended = decoder.isEndToken(state.tokens[state.tokens.length - 1] as number);
  const body = ended ? state.tokens.slice(0, -1) : state.tokens;
  if (stop.length > 0) {
    // Only the end of the text can hold a new match: decode a tail long enough for every stop sequence.
    const longest = maxOf(stop.map((sequence) => sequence.length));
    const tail = decoder.decodeText(body.slice(Math.max(0, body.length - 4 * longest - 4)));
    if (stop.some((sequence) => sequence.length > 0 && tail.includes(sequence))) {
      const text = decoder.decodeText(body);
      let cut = -1;
      for (const sequence of stop) {
        if (sequence.length === 0) continue;
        const at = text.indexOf(sequence);
        if (at >= 0 && (cut < 0 || at < cut)) cut = at;
      }
      let kept = body.length;
      while (kept > 0 && decoder.decodeText(body.slice(0, kept)).length > cut) kept -= 1;
      state.finishReason = 'stop';
      state.text = text.slice(0, cut);
      state.keptTokens = kept;
      return;
    }
  }
  state.keptTokens = state.tokens.length;
  if (ended) state.finishReason = 'stop';
  else if (state.tokens.length >= state.row.sampling.maxTokens) state.finishReason = 'length';
  if (state.finishReason !== null) state.text = decoder.decodeText(body);
}

/** Host copies of the embedding tables: looking tokens up in JS beats the wasm gather kernel. */
export interface HostEmbeddings {
  /** `[vocabulary, modelDimension]`, row-major. */
  readonly token: Float32Array;
  /** `[contextLength, modelDimension]`, row-major. */
  readonly position: Float32Array;
}

/** Writes token + position embeddings of `tokens` (positions from `start`) into `target` rows from `row`. */
function embed(
  embeddings: HostEmbeddings,
  config: ModelConfig,
  tokens: readonly number[],
  start: number,
  target: Float32Array,
  row: number,
): void {
  const d = config.modelDimension;
  tokens.forEach((token, offset) => {
    const base = (row + offset) * d;
    const tokenBase = token * d;
    const positionBase = (start + offset) * d;
    for (let index = 0; index < d; index += 1)
      target[base + index] =
        (embeddings.token[tokenBase + index] as number) + (embeddings.position[positionBase + index] as number);
  });
}

/** Most attention scores (rows × heads × prompt length²) in one prefill pass. */
const PREFILL_SCORE_BUDGET = 16 * 1024 * 1024;

/** Waits for the event loop to run other work (HTTP requests) between decoding steps. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Extends every row until it ends, sharing each forward pass across rows. Rows must have prompts
 * of at least one token, shorter than the context, and `maxTokens >= 1` that fits the context.
 */
export async function generate(
  tf: TensorFlow,
  config: ModelConfig,
  parameters: ParameterTensors,
  embeddings: HostEmbeddings,
  rows: readonly GenerationRow[],
): Promise<GeneratedSequence[]> {
  const tokenizer = tokenizerOf(config);
  return generateRows(
    tf,
    {
      vocabularySize: config.vocabularySize,
      contextLength: config.contextLength,
      headCount: config.headCount,
      attentionWindow: config.attentionWindow,
      prefill: (prompts, promptLength) => {
        const embedded = new Float32Array(prompts.length * promptLength * config.modelDimension);
        prompts.forEach((prompt, index) => embed(embeddings, config, prompt, 0, embedded, index * promptLength));
        return prefill(
          tf,
          config,
          parameters,
          embedded,
          prompts.length,
          promptLength,
          prompts.map((prompt) => prompt.length),
        );
      },
      decodeStep: (cache, tokens, positions, keyMask) => {
        const embedded = new Float32Array(tokens.length * config.modelDimension);
        tokens.forEach((token, row) => embed(embeddings, config, [token], positions[row] as number, embedded, row));
        return decodeStep(tf, config, parameters, cache, embedded, tokens.length, keyMask);
      },
      selectCacheRows: (cache, selected) => selectCacheRows(tf, config, cache, selected),
      decodeText: (ids) => tokenizer.decodeTokens(ids),
      isEndToken: (id) => id === END_TOKEN_ID,
    },
    rows,
  );
}

/**
 * What {@link generateSequences} needs of a model on any runtime: an asynchronous batched prefill
 * and decoding step over a cache of its own kind `C` (tfjs tensors, host buffers for onnxruntime),
 * which the loop owns: a decoding step takes the cache and answers the one to use next.
 */
export interface StepDecoder<C> {
  readonly vocabularySize: number;
  readonly contextLength: number;
  /** Attention heads (to bound the attention scores of one prefill pass). */
  readonly headCount: number;
  /** Sliding attention window in tokens; `undefined` = every earlier token is in sight. */
  readonly attentionWindow: number | undefined;
  /** Right-padded `prompts`: the logits of each row's last prompt token `[rows, vocabulary]` and the filled cache. */
  prefill(prompts: readonly (readonly number[])[], promptLength: number): Promise<{ logits: Float32Array; cache: C }>;
  /**
   * One decoding step: `tokens[row]` at `positions[row]` over the cache plus itself, `keyMask`
   * `[rows, cacheLength + 1]` of 0 or -1e9. Answers the next logits and the cache to use next
   * (what the step no longer needs of `cache` is freed).
   */
  decodeStep(
    cache: C,
    tokens: readonly number[],
    positions: Int32Array,
    keyMask: Float32Array,
  ): Promise<{ logits: Float32Array; cache: C }>;
  /** The given batch rows of a cache, in order (a new cache; the caller frees the old one). */
  selectCacheRows(cache: C, rows: readonly number[]): C;
  /** Caches of consecutive batch chunks as one (the chunks are freed; one chunk is returned as it is). */
  joinCaches(caches: readonly C[]): C;
  /** Frees a cache. */
  disposeCache(cache: C): void;
  /** The completion text of token ids. */
  decodeText(ids: readonly number[]): string;
  /** Whether a sampled token ends the row (kept in its tokens, left out of its text). */
  isEndToken(id: number): boolean;
}

/** A tfjs {@link BatchDecoder} as a {@link StepDecoder}: each pass in `tf.tidy`, logits read to the host. */
function tfjsStepDecoder(tf: TensorFlow, model: BatchDecoder): StepDecoder<KeyValueCache> {
  return {
    vocabularySize: model.vocabularySize,
    contextLength: model.contextLength,
    headCount: model.headCount,
    attentionWindow: model.attentionWindow,
    prefill: async (prompts, promptLength) => {
      const result = tf.tidy(() => {
        const output = model.prefill(prompts, promptLength);
        return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
      });
      const cache = { keys: result.keys, values: result.values };
      try {
        return { cache, logits: (await result.logits.data()) as Float32Array };
      } catch (error) {
        disposeCache(cache);
        throw error;
      } finally {
        result.logits.dispose();
      }
    },
    decodeStep: async (previous, tokens, positions, keyMask) => {
      const result = tf.tidy(() => {
        const output = model.decodeStep(previous, tokens, positions, keyMask);
        return { logits: output.logits, keys: output.cache.keys, values: output.cache.values };
      });
      const cache = { keys: result.keys, values: result.values };
      disposeReplaced(previous, cache);
      try {
        return { cache, logits: (await result.logits.data()) as Float32Array };
      } finally {
        result.logits.dispose();
      }
    },
    selectCacheRows: (cache, rows) => model.selectCacheRows(cache, rows),
    joinCaches: (caches) => joinCaches(tf, caches),
    disposeCache,
    decodeText: (ids) => model.decodeText(ids),
    isEndToken: (id) => model.isEndToken(id),
  };
}

/**
 * The generation loop shared by every model: extends every row until it ends, sharing each forward
 * pass across rows. Rows must have prompts of at least one token, shorter than the context, and
 * `maxTokens >= 1` that fits the context. A returned sequence keeps its final end token (so a
 * trainer learns to stop); its `text` does not.
 */
export function generateRows(
  tf: TensorFlow,
  model: BatchDecoder,
  rows: readonly GenerationRow[],
): Promise<GeneratedSequence[]> {
  return generateSequences(tfjsStepDecoder(tf, model), rows);
}

/** {@link generateRows} over a {@link StepDecoder} of any runtime. */
export async function generateSequences<C>(
  model: StepDecoder<C>,
  rows: readonly GenerationRow[],
): Promise<GeneratedSequence[]> {
  if (rows.length === 0) return [];
  const vocabulary = model.vocabularySize;
  const states: RowState[] = rows.map((row) => ({
    row,
    tokens: [],
    logprobs: [],
    alternatives: [],
    finishReason: null,
    text: '',
    keptTokens: 0,
  }));
  const promptLength = maxOf(rows.map((row) => row.prompt.length));
  let { cache, logits: logitsData } = await prefillRows(model, rows, promptLength);
  // Rows of the cache, in order. Finished rows ride along (their outputs are ignored) until half
  // of them are done: compacting the cache is a gather over all of it, too slow for every finish.
  let cacheRows = states.map((_, index) => index);
  let step = 0;
  try {
    for (;;) {
      sampleNextTokens(model, states, cacheRows, logitsData, vocabulary);
      const remaining = cacheRows.filter((stateIndex) => (states[stateIndex] as RowState).finishReason === null);
      if (remaining.length === 0) break;
      if (remaining.length <= cacheRows.length / 2) {
        const selected = model.selectCacheRows(
          cache,
          remaining.map((stateIndex) => cacheRows.indexOf(stateIndex)),
        );
        model.disposeCache(cache);
        cache = selected;
        cacheRows = remaining;
      }
      step += 1;
      const keyLength = promptLength + step;
      const tokens: number[] = [];
      const positions = new Int32Array(cacheRows.length);
      const keyMask = new Float32Array(cacheRows.length * keyLength);
      fillDecodeInputs(model, states, cacheRows, promptLength, keyLength, tokens, positions, keyMask);
      const result = await model.decodeStep(cache, tokens, positions, keyMask);
      cache = result.cache;
      logitsData = result.logits;
      await yieldToEventLoop();
    }
  } finally {
    model.disposeCache(cache);
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

/**
 * The prefill of every row: the filled cache (one batch row per row) and the logits of each row's
 * last prompt token (`[rows, vocabulary]`, row-major). Rows with the same prompt (the n choices of
 * a request, a group's rollouts) share one prefill; the unique prompts run in chunks whose
 * attention scores stay within PREFILL_SCORE_BUDGET.
 */
async function prefillRows<C>(
  model: StepDecoder<C>,
  rows: readonly GenerationRow[],
  promptLength: number,
): Promise<{ cache: C; logits: Float32Array }> {
  const vocabulary = model.vocabularySize;
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
  const parts = await prefillChunks(model, unique, promptLength);
  const joined = model.joinCaches(parts.map((part) => part.cache));
  const uniqueLogits = new Float32Array(unique.length * vocabulary);
  let offset = 0;
  for (const part of parts) {
    uniqueLogits.set(part.logits, offset);
    offset += part.logits.length;
  }
  const identity = rowToUnique.every((uniqueRow, row) => uniqueRow === row);
  if (identity) return { cache: joined, logits: uniqueLogits };
  const cache = model.selectCacheRows(joined, rowToUnique);
  model.disposeCache(joined);
  const logits = new Float32Array(rows.length * vocabulary);
  rowToUnique.forEach((uniqueRow, row) =>
    logits.set(uniqueLogits.subarray(uniqueRow * vocabulary, (uniqueRow + 1) * vocabulary), row * vocabulary),
  );
  return { cache, logits };
}

/** Prefills `prompts` in chunks of at most PREFILL_SCORE_BUDGET attention scores; each chunk's cache and logits. */
async function prefillChunks<C>(
  model: StepDecoder<C>,
  prompts: readonly (readonly number[])[],
  promptLength: number,
): Promise<{ cache: C; logits: Float32Array }[]> {
  const window = model.attentionWindow;
  const perRow =
    window !== undefined && window < promptLength
      ? model.headCount * Math.ceil(promptLength / window) * window * 2 * window
      : model.headCount * promptLength * promptLength;
  const chunkRows = Math.max(1, Math.floor(PREFILL_SCORE_BUDGET / perRow));
  const parts: { cache: C; logits: Float32Array }[] = [];
  try {
    for (let start = 0; start < prompts.length; start += chunkRows) {
      parts.push(await model.prefill(prompts.slice(start, start + chunkRows), promptLength));
      await yieldToEventLoop();
    }
  } catch (error) {
    for (const part of parts) model.disposeCache(part.cache);
    throw error;
  }
  return parts;
}

/** The caches of consecutive batch chunks as one cache (the chunks' tensors are disposed; one chunk is returned as it is). */
function joinCaches(tf: TensorFlow, caches: readonly KeyValueCache[]): KeyValueCache {
  if (caches.length === 1) return caches[0] as KeyValueCache;
  const joinLayers = (pick: (cache: KeyValueCache) => Tensor3D[][]): Tensor3D[][] =>
    pick(caches[0] as KeyValueCache).map((_, layer) => [
      tf.keep(
        tf.concat(
          caches.map((cache) => (pick(cache)[layer] as Tensor3D[])[0] as Tensor3D),
          0,
        ),
      ),
    ]);
  const joined: KeyValueCache = {
    keys: joinLayers((cache) => cache.keys),
    values: joinLayers((cache) => cache.values),
  };
  for (const cache of caches) disposeCache(cache);
  return joined;
}

/**
 * Samples the next token of every unfinished row from its logits (`logitsData` row `position` for
 * the row at `cacheRows[position]`) and marks the rows that end: a stop, the context, a cancel.
 */
function sampleNextTokens(
  model: Pick<BatchDecoder, 'decodeText' | 'isEndToken' | 'contextLength'>,
  states: readonly RowState[],
  cacheRows: readonly number[],
  logitsData: Float32Array,
  vocabulary: number,
): void {
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
    finishOnStop(state, model);
    if (state.finishReason === null && state.row.prompt.length + state.tokens.length >= model.contextLength)
      state.finishReason = 'length';
    if (state.row.isCancelled?.()) state.finishReason = 'length';
  });
}

/**
 * Fills the inputs of the next decoding step for the cache's rows: each row's last token, its
 * position, and its key mask (`[rows, keyLength]`, zero-filled by the caller): -1e9 over the
 * padding after a shorter prompt, and over the keys a sliding window has left behind.
 */
function fillDecodeInputs(
  model: Pick<BatchDecoder, 'attentionWindow' | 'contextLength'>,
  states: readonly RowState[],
  cacheRows: readonly number[],
  promptLength: number,
  keyLength: number,
  tokens: number[],
  positions: Int32Array,
  keyMask: Float32Array,
): void {
  const window = model.attentionWindow;
  cacheRows.forEach((stateIndex, position) => {
    const state = states[stateIndex] as RowState;
    // A finished row keeps decoding at a valid position; its output is never read.
    const at = Math.min(state.row.prompt.length + state.tokens.length - 1, model.contextLength - 1);
    positions[position] = at;
    tokens.push(state.tokens[state.tokens.length - 1] as number);
    for (let key = state.row.prompt.length; key < promptLength; key += 1) keyMask[position * keyLength + key] = -1e9;
    if (window !== undefined && at >= window) {
      // Sliding window: keys at positions <= at - window are out of sight (as in training).
      const oldest = at - window;
      for (let key = 0; key < Math.min(promptLength, state.row.prompt.length, oldest + 1); key += 1)
        keyMask[position * keyLength + key] = -1e9;
      for (let key = promptLength; key < keyLength; key += 1)
        if (state.row.prompt.length + key - promptLength <= oldest) keyMask[position * keyLength + key] = -1e9;
        else break;
    }
  });
}

/** The base models: a transformer shape, a tokenizer, and the seed of its deterministic initialisation. */
import { bpeTokenizer } from './bpe.js';
import { BYTE_TOKENIZER, VOCABULARY_SIZE } from './tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/** Shape and initialisation of a base model. */
export interface ModelConfig {
  /** Base model id, as listed by `GET /v1/preview/base-models`. */
  readonly id: string;
  /** Vocabulary size (bytes + special tokens, + merged tokens for `bpe`). */
  readonly vocabularySize: number;
  /**
   * The tokenizer: `byte` (ids are bytes and special tokens) or `bpe` (plus the merged tokens of
   * `src/engine/data/bpe-merges.json`). Absent means `byte`.
   */
  readonly tokenizer?: 'byte' | 'bpe' | undefined;
  /**
   * Sliding attention window in tokens: each token attends to itself and the `attentionWindow - 1`
   * tokens before it, in training and sampling alike. Absent: the whole context.
   */
  readonly attentionWindow?: number | undefined;
  /** Maximum sequence length (prompt + completion) in tokens. */
  readonly contextLength: number;
  /** Width of the residual stream. */
  readonly modelDimension: number;
  /** Number of transformer blocks. */
  readonly layerCount: number;
  /** Attention heads per block (`modelDimension` must divide by it). */
  readonly headCount: number;
  /** Hidden width of each block's MLP. */
  readonly feedForwardDimension: number;
  /** Seed of the initial weights: the same config and seed always give the same weights. */
  readonly seed: number;
}

/**
 * The default base model: 2 blocks, width 64, 4 heads, context 256, about 150k parameters.
 * Trains at several thousand tokens per second on one CPU core.
 */
export const TINY_CHAT: ModelConfig = {
  id: 'policyloop/tiny-chat',
  vocabularySize: VOCABULARY_SIZE,
  contextLength: 256,
  modelDimension: 64,
  layerCount: 2,
  headCount: 4,
  feedForwardDimension: 256,
  seed: 1,
};

/** A wider, deeper variant (4 blocks, width 128, context 512, about 0.9M parameters) for tasks the tiny model cannot fit. */
export const SMALL_CHAT: ModelConfig = {
  id: 'policyloop/small-chat',
  vocabularySize: VOCABULARY_SIZE,
  contextLength: 512,
  modelDimension: 128,
  layerCount: 4,
  headCount: 4,
  feedForwardDimension: 512,
  seed: 1,
};

/**
 * The base model for agents with tools: the BPE tokenizer (2,048 tokens, about 2.7 characters per
 * token on agent prompts against 1.05 for bytes), a 4,096-token context, 2 blocks of width 64.
 * A system prompt, three tools and four turns (~6,000 characters, ~2,200 tokens) fit with room for
 * the answers.
 */
export const AGENT_CHAT: ModelConfig = {
  id: 'policyloop/agent-chat',
  vocabularySize: 2048,
  tokenizer: 'bpe',
  contextLength: 4096,
  attentionWindow: 128,
  modelDimension: 64,
  layerCount: 2,
  headCount: 4,
  feedForwardDimension: 256,
  seed: 1,
};

/** Every base model the engine serves, by id. */
export const MODEL_CONFIGS: ReadonlyMap<string, ModelConfig> = new Map(
  [TINY_CHAT, SMALL_CHAT, AGENT_CHAT].map((config) => [config.id, config]),
);

/** The tokenizer of a base model (throws when the shipped merges do not give its vocabulary size). */
export function tokenizerOf(config: ModelConfig): Tokenizer {
  const tokenizer = config.tokenizer === 'bpe' ? bpeTokenizer() : BYTE_TOKENIZER;
  if (tokenizer.vocabularySize !== config.vocabularySize)
    throw new Error(
      `Expected the ${tokenizer.name} tokenizer of ${config.id} to have ${config.vocabularySize} tokens, got ${tokenizer.vocabularySize}.`,
    );
  return tokenizer;
}

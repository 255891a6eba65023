/** The base models: a transformer shape plus the seed of its deterministic initialisation. */
import { VOCABULARY_SIZE } from './tokenizer.js';

/** Shape and initialisation of a base model. */
export interface ModelConfig {
  /** Base model id, as listed by `GET /v1/preview/base-models`. */
  readonly id: string;
  /** Vocabulary size (bytes + special tokens). */
  readonly vocabularySize: number;
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

/** Every base model the engine serves, by id. */
export const MODEL_CONFIGS: ReadonlyMap<string, ModelConfig> = new Map(
  [TINY_CHAT, SMALL_CHAT].map((config) => [config.id, config]),
);

/** Id of the default base model. */
export const DEFAULT_BASE_MODEL = TINY_CHAT.id;

/**
 * The local policy engine: small transformers on tfjs (wasm backend), byte-level or BPE, that
 * sample chat completions with logprobs and train checkpoints by RL and SFT. See `docs/engine.md`.
 * @module
 */
export { createEngine } from './engine.js';
export type { EngineOptions } from './engine.js';
export { EngineInputError } from './types.js';
export type { Engine, EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult, PolicyRef } from './types.js';
export { AGENT_CHAT, DEFAULT_BASE_MODEL, MODEL_CONFIGS, SMALL_CHAT, TINY_CHAT, tokenizerOf } from './model-config.js';
export type { ModelConfig } from './model-config.js';
export { AUTO_SFT_BATCH_SIZE, DEFAULT_LEARNING_RATE, DEFAULT_SFT_LEARNING_RATE } from './trainer.js';
export { parameterCount, METADATA_FILE, OPTIMIZER_FILE, WEIGHTS_FILE } from './weights.js';
export type { CheckpointMetadata } from './weights.js';
export {
  END_TOKEN_ID,
  SPECIAL_TOKENS,
  VOCABULARY_SIZE,
  decodeTokens,
  encodeText,
  recoverTokenId,
  tokenBytes,
  tokenString,
} from './tokenizer.js';
export { BYTE_TOKENIZER } from './tokenizer.js';
export type { LogprobTokenEntry, SpecialToken, Tokenizer } from './tokenizer.js';
export { bpeTokenizer, createBpeTokenizer, pretokenize } from './bpe.js';
export { renderPrompt } from './chat-template.js';
export { formatToolCall, formatToolCallText, parseToolCalls } from './tool-calls.js';
export { exportCheckpoint } from './hf/export.js';
export type { ExportRequest } from './hf/export.js';
export { ModelRegistry, hubCacheDirectory } from './hf/registry.js';
export { SUPPORTED_ARCHITECTURES } from './hf/config.js';
export { DEFAULT_LORA_SETTINGS } from './hf/lora.js';
export type { LoraSettings } from './hf/lora.js';
export type { ParsedCompletion, ParsedToolCall } from './tool-calls.js';

/**
 * The local policy engine: small transformers on tfjs (wasm backend), byte-level or BPE, that
 * sample chat completions with logprobs and train checkpoints by RL and SFT. See `docs/engine.md`.
 * @module
 */
export { createEngine } from './engine.js';
export { EngineInputError, EngineUnavailableError } from './types.js';
export type { Engine, EngineTrainingEvent, EngineTrainingJob, PolicyRef } from './types.js';
export { AGENT_CHAT, MODEL_CONFIGS, SMALL_CHAT, TINY_CHAT, tokenizerOf } from './model-config.js';
export type { ModelConfig } from './model-config.js';
export { DEFAULT_LEARNING_RATE, DEFAULT_SFT_LEARNING_RATE } from './trainer.js';
export { parameterCount, METADATA_FILE, WEIGHTS_FILE } from './weights.js';
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
export { renderPrompt } from './chat-template.js';
export { formatToolCallText, parseToolCalls } from './tool-calls.js';
export { exportCheckpoint } from './hf/export.js';
export { ModelRegistry } from './hf/registry.js';

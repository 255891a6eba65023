/**
 * The text layer of real (Hugging Face) models: a model folder's own tokenizer and chat template,
 * the parsing of its replies (tool calls, Qwen3's `<think>`), and the OpenAI-shaped `Choice` of a
 * sampled sequence. The local engine samples through it, and so does the Tinker backend, which
 * renders and tokenizes on the client. It loads neither tfjs nor the engine.
 * @module
 */
export { loadTextLayer } from './text-layer.js';
export type {
  ChatMessage,
  ChatRenderOptions,
  DecodeOptions,
  ParseAssistantOptions,
  ParsedAssistant,
  TextLayer,
  TextLayerOptions,
  Tool,
  ToolCall,
  ToolCallFormat,
} from './text-layer.js';
export { loadDefaultTextLayer } from './loader.js';
export type { TextLayerLoader } from './loader.js';
export { buildHfChoice, tokenLogprobs } from './choice.js';
export type { HfChoiceOptions, SampledText, TokenAlternative, TokenNames } from './choice.js';
export { EngineInputError } from './input-error.js';
export { promptTokens } from './prompt.js';
export { hubCacheDirectory, snapshotOf, textFolderOf } from './hub-cache.js';

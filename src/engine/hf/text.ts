/**
 * What the engine needs from a model's text layer (its own tokenizer and chat template, from the
 * model folder): the interface of `src/engine/hf/text-layer.ts`, and how it is loaded.
 */

/** A tool call parsed out of generated text, in OpenAI's shape. */
export interface ParsedAssistantToolCall {
  readonly id?: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** An assistant message parsed out of generated text. */
export interface ParsedAssistant {
  readonly content: string | null;
  readonly tool_calls?: readonly ParsedAssistantToolCall[];
  readonly reasoning?: string;
}

/** A model's tokenizer and chat template. */
export interface TextLayer {
  /** Token ids of text (no special tokens added). */
  encode(text: string): number[];
  /** Text of token ids (special tokens skipped). */
  decode(ids: readonly number[]): string;
  /** The model's chat template applied to OpenAI-shaped messages and tools. */
  renderChat(
    messages: readonly unknown[],
    options: { readonly tools?: readonly unknown[] | undefined; readonly addGenerationPrompt: boolean },
  ): string;
  /** Content, tool calls and reasoning of a completion, the way the model family writes them. */
  parseAssistant(text: string): ParsedAssistant;
  /** Token ids that end a turn (from `generation_config.json`, else the tokenizer's eos). */
  readonly stopTokenIds: readonly number[];
  /** Number of token ids of the tokenizer. */
  readonly vocabularySize: number;
}

/** Loads the text layer of a model folder. */
export type TextLayerLoader = (directory: string) => Promise<TextLayer>;

/** The module that implements the text layer (imported on first use). */
const TEXT_LAYER_MODULE = './text-layer.js';

/** Loads a model folder's text layer with `src/engine/hf/text-layer.ts`. */
export const loadDefaultTextLayer: TextLayerLoader = async (directory) => {
  let module: { loadTextLayer?: TextLayerLoader };
  try {
    module = (await import(TEXT_LAYER_MODULE)) as { loadTextLayer?: TextLayerLoader };
  } catch (error) {
    throw new Error(
      `The text layer of Hugging Face models (${TEXT_LAYER_MODULE}) could not be loaded: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (typeof module.loadTextLayer !== 'function')
    throw new Error(`Expected ${TEXT_LAYER_MODULE} to export loadTextLayer(directory).`);
  return module.loadTextLayer(directory);
};
